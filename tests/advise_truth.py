"""Hand-written ground truth for the advisor fixtures (tests/bpf/advise_*.c).

For every map of every advise_*.o object (global-data maps included) it says what the
programs do with the map, worked out from the C sources and their clang 14 -O2 disassembly,
not from bpfmem. Keys are the map names bpfmem gives (MapSpec.name): BTF maps keep their
full name (``write_through_ptr``; the kernel truncates it to ``write_through_p``), global
data maps get libbpf's internal name (``advise_r.rodata``, ``advise_s.bss``).

verdict
    ``datapath_writes``  some program changes the map's contents: update, delete, push,
                         ringbuf_output, or a store/atomic through a pointer into a value;
    ``read_only``        programs reference the map but never change it (lookup whose result
                         is only read, a .rodata read, a tail call through a prog array);
    ``unreferenced``     no program references the map.
ops (sorted)
    ``lookup`` bpf_map_lookup_elem, ``update`` bpf_map_update_elem, ``delete``
    bpf_map_delete_elem, ``push`` bpf_map_push_elem, ``ringbuf_output`` bpf_ringbuf_output,
    ``tail_call`` bpf_tail_call; ``direct_value`` the program loads the address of a
    global-data value itself (ld_imm64 of a .rodata/.bss variable); ``write_through_pointer``
    a store or atomic into a map value through a pointer obtained from ``lookup`` or
    ``direct_value``. Reading through such a pointer is not an op of its own.
programs (sorted)
    the entry programs (ELF symbol names in program sections) whose code, including the
    static subprograms they call, touches the map. The subprograms bump()/peek() in
    advise_indirect.c are not programs; their maps are credited to their caller sub_tc.

Every object was loaded by the kernel (Linux 6.18, libbpf 1.1 via ``bpftool prog loadall``)
and the kernel's per-program map lists (bpf_prog_info.map_ids) equal the "programs" here.

How clang 14 compiled the indirect cases (advise_indirect.c):
- subprog_updated / subprog_lookup: passed as the first argument (r1) of the static
  __noinline subprograms. An empty ``asm volatile`` barrier on the pointer is needed: without
  it clang propagates the constant map address into each single-caller subprogram, drops the
  argument and emits the ld_imm64 inside the callee.
- branch_a / branch_b: clang keeps one bpf_map_update_elem call site; r1 is set by an
  ld_imm64 of branch_b, a conditional jump on ctx->rx_queue_index & 1, and an ld_imm64 of
  branch_a (no barrier needed).
- spilled_updated: clang does not spill a map pointer by itself, even with six values live
  across a helper call: it re-emits the ld_imm64 where the pointer is needed. The fixture
  forces the round trip with a ``void *volatile`` local: the map address is stored to
  r10-8 and loaded back into r1 just before the call.
"""

from __future__ import annotations

TRUTH: dict[str, dict[str, dict]] = {
    "advise_updates.o": {
        "xdp_updated": {"verdict": "datapath_writes", "ops": ["update"],
                        "programs": ["upd_xdp"]},
        "tc_updated": {"verdict": "datapath_writes", "ops": ["update"],
                       "programs": ["upd_tc"]},
        "kprobe_updated": {"verdict": "datapath_writes", "ops": ["update"],
                           "programs": ["upd_kprobe"]},
        "tp_updated": {"verdict": "datapath_writes", "ops": ["update"],
                       "programs": ["upd_tp"]},
        "cgroup_updated": {"verdict": "datapath_writes", "ops": ["update"],
                           "programs": ["upd_cgroup"]},
        "deleted_map": {"verdict": "datapath_writes", "ops": ["delete"],
                        "programs": ["del_tc"]},
        # c->packets++ (load, add, store) and a lock-add on c->bytes
        "write_through_ptr": {"verdict": "datapath_writes",
                              "ops": ["lookup", "write_through_pointer"],
                              "programs": ["wtp_xdp"]},
    },
    "advise_readonly.o": {
        "ro_lookup_xdp": {"verdict": "read_only", "ops": ["lookup"],
                          "programs": ["ro_xdp"]},
        "ro_lookup_tc": {"verdict": "read_only", "ops": ["lookup"],
                         "programs": ["ro_tc"]},
        "unused_map": {"verdict": "unreferenced", "ops": [], "programs": []},
        # cfg_drop_limit (ro_xdp), cfg_mark (ro_tc)
        "advise_r.rodata": {"verdict": "read_only", "ops": ["direct_value"],
                            "programs": ["ro_tc", "ro_xdp"]},
    },
    "advise_indirect.o": {
        "subprog_updated": {"verdict": "datapath_writes", "ops": ["update"],
                            "programs": ["sub_tc"]},
        "subprog_lookup": {"verdict": "read_only", "ops": ["lookup"],
                           "programs": ["sub_tc"]},
        "branch_a": {"verdict": "datapath_writes", "ops": ["update"],
                     "programs": ["branch_xdp"]},
        "branch_b": {"verdict": "datapath_writes", "ops": ["update"],
                     "programs": ["branch_xdp"]},
        "spilled_updated": {"verdict": "datapath_writes", "ops": ["update"],
                            "programs": ["spill_xdp"]},
    },
    "advise_special.o": {
        "queue_pushed": {"verdict": "datapath_writes", "ops": ["push"],
                         "programs": ["push_xdp"]},
        "rb_output": {"verdict": "datapath_writes", "ops": ["ringbuf_output"],
                      "programs": ["rb_xdp"]},
        "jump_table": {"verdict": "read_only", "ops": ["tail_call"],
                       "programs": ["tail_xdp"]},
        # events_seen: __sync_fetch_and_add -> one lock-add, no plain load or store
        "advise_s.bss": {"verdict": "datapath_writes",
                         "ops": ["direct_value", "write_through_pointer"],
                         "programs": ["push_xdp", "rb_xdp", "tail_xdp"]},
    },
}
