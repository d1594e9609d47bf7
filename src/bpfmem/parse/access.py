"""What each program does with each map: lookup, update, delete, push/pop/peek, for_each,
redirect, tail call, ring buffer and perf output, local-storage get (with the create flag),
and writes through a pointer a lookup returned.

A small abstract interpreter per program: registers and 8-byte stack slots hold "pointer to
map {a, b}", "pointer into a value of map {a}", frame-pointer offsets and constants; branches
are followed to a fixed point (values that differ on two paths are joined, keeping every map
they may point to); bpf-to-bpf calls and callbacks are analyzed with the caller's arguments.
Where the analysis loses a map pointer it records "unknown" for that map, never "read-only".
Work per program is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ParseError
from .helpers import HELPER_ARGS, HELPER_NAMES
from .insn import ALU, ALU64, LDX, MODE_ATOMIC, ST, STX, Insn, decode
from .objspec import ObjectCode, parse_object_code

MAX_VISITS = 400_000       # instruction visits per program, callees included
MAX_DEPTH = 8              # bpf-to-bpf call depth
MAX_STACK = 512

READ_OPS = frozenset({"lookup", "peek", "tail_call", "perf_output", "redirect", "for_each",
                      "direct_value", "ringbuf_query", "storage_get", "user_ringbuf_drain"})
WRITE_OPS = frozenset({"update", "delete", "push", "pop", "write_through_pointer",
                       "storage_get_create", "stackid", "ringbuf_output", "ringbuf_reserve",
                       "sock_update", "storage_delete"})

# helper name -> (register holding the map, operation, r0 points into a value, callback reg)
_HELPERS = {
    "map_lookup_elem": (1, "lookup", True, 0), "map_lookup_percpu_elem": (1, "lookup", True, 0),
    "map_update_elem": (1, "update", False, 0), "map_delete_elem": (1, "delete", False, 0),
    "map_push_elem": (1, "push", False, 0), "map_pop_elem": (1, "pop", False, 0),
    "map_peek_elem": (1, "peek", False, 0), "tail_call": (2, "tail_call", False, 0),
    "perf_event_output": (2, "perf_output", False, 0), "skb_output": (2, "perf_output", False, 0),
    "xdp_output": (2, "perf_output", False, 0), "get_stackid": (2, "stackid", False, 0),
    "redirect_map": (1, "redirect", False, 0), "sk_redirect_map": (2, "redirect", False, 0),
    "msg_redirect_map": (2, "redirect", False, 0), "sk_redirect_hash": (2, "redirect", False, 0),
    "msg_redirect_hash": (2, "redirect", False, 0), "sk_select_reuseport": (2, "redirect", False, 0),
    "sock_map_update": (2, "sock_update", False, 0), "sock_hash_update": (2, "sock_update", False, 0),
    "get_local_storage": (1, "storage_get", True, 0),
    "sk_storage_get": (1, "storage_get", True, 0), "task_storage_get": (1, "storage_get", True, 0),
    "inode_storage_get": (1, "storage_get", True, 0), "cgrp_storage_get": (1, "storage_get", True, 0),
    "sk_storage_delete": (1, "storage_delete", False, 0),
    "task_storage_delete": (1, "storage_delete", False, 0),
    "inode_storage_delete": (1, "storage_delete", False, 0),
    "cgrp_storage_delete": (1, "storage_delete", False, 0),
    "ringbuf_output": (1, "ringbuf_output", False, 0),
    "ringbuf_reserve": (1, "ringbuf_reserve", False, 0),
    "ringbuf_reserve_dynptr": (1, "ringbuf_reserve", False, 0),
    "ringbuf_query": (1, "ringbuf_query", False, 0),
    "user_ringbuf_drain": (1, "user_ringbuf_drain", False, 2),
    "for_each_map_elem": (1, "for_each", False, 2),
    "skb_under_cgroup": (2, "lookup", False, 0),
    "current_task_under_cgroup": (1, "lookup", False, 0),
    "timer_init": (0, "", False, 0), "timer_set_callback": (0, "", False, 2),
    "loop": (0, "", False, 2), "find_vma": (0, "", False, 3),
}
_HELPER_BY_ID = {i: _HELPERS[n] for i, n in enumerate(HELPER_NAMES) if n in _HELPERS}
_FLAG_ARG_HELPERS = {i for i, n in enumerate(HELPER_NAMES) if n.endswith("_storage_get")}

# abstract values: None (scalar, unknown), ("map", ids), ("val", ids), ("any", ids) (may be
# a pointer of those maps, lost at a join), ("fp", off), ("k", constant), ("func", text off)


def _ids(v) -> frozenset:
    return v[1] if v is not None and v[0] in ("map", "val", "any", "inner", "innerval") \
        else frozenset()


def _join(a, b):
    if a == b:
        return a
    ia, ib = _ids(a), _ids(b)
    if a is not None and b is not None and a[0] == b[0] and a[0] in ("map", "val"):
        return (a[0], ia | ib)
    if ia or ib:
        return ("any", ia | ib)
    return None


@dataclass
class MapUse:
    """What the programs do with one map."""

    ops: dict[str, set[str]] = field(default_factory=dict)    # op -> program names

    def add(self, op: str, prog: str) -> None:
        self.ops.setdefault(op, set()).add(prog)

    @property
    def verdict(self) -> str:
        if not self.ops:
            return "unreferenced"
        ops = {o for o in self.ops if not o.startswith("inner_")} or {"lookup"}
        if WRITE_OPS & ops:
            return "datapath_writes"
        if ops <= READ_OPS:
            return "read_only"
        return "unknown"      # lost track of it, or a helper whose effect we do not model

    @property
    def writers(self) -> dict[str, list[str]]:
        return {op: sorted(p) for op, p in self.ops.items() if op in WRITE_OPS}


class _Analyzer:
    def __init__(self, code: ObjectCode):
        self.code = code
        self.elf = code.elf
        self.uses: dict[int, MapUse] = {i: MapUse() for i in range(len(code.spec.maps))}
        self.map_in_map = frozenset(i for i, m in enumerate(code.spec.maps)
                                    if m.type in (12, 13))   # array_of_maps, hash_of_maps
        self._insns: dict[tuple[int, int], list[Insn]] = {}

    def insns(self, shndx: int, start: int) -> list[Insn]:
        key = (shndx, start)
        if key not in self._insns:
            f = self.code.function(shndx, start)
            if f is None:
                raise ParseError(f"no function at offset {start}",
                                 section=self.elf.sections[shndx].name)
            data = self.elf.data(self.elf.sections[shndx]).data[f.value:f.value + f.size]
            self._insns[key] = decode(data, little=self.elf.little_endian,
                                      section=self.elf.sections[shndx].name, base=f.value)
        return self._insns[key]

    def record(self, ids, op: str) -> None:
        for i in ids:
            self.uses[i].add(op, self.prog)

    def program(self, name: str, shndx: int, start: int) -> None:
        self.prog = name
        self.visits = 0
        regs = [None] * 11
        regs[10] = ("fp", 0)
        try:
            self.function(shndx, start, tuple(regs), 0)
        except _Budget:
            for i, u in self.uses.items():
                if any(name in progs for progs in u.ops.values()):
                    u.add("unknown", name)

    def function(self, shndx: int, start: int, entry: tuple, depth: int) -> None:
        insns = self.insns(shndx, start)
        if not insns:   # a zero-size function (the kernel would refuse it): does nothing
            return
        by_index = {x.index: k for k, x in enumerate(insns)}
        # states are kept only where paths meet (jump targets); straight-line code runs on
        # one mutable state
        joins = {x.jump_target for x in insns if x.is_jump}
        states: dict[int, tuple] = {0: (entry, ())}
        work = [0]
        while work:
            k = work.pop()
            regs_t, stack_t = states[k]
            regs, stack = list(regs_t), dict(stack_t)
            while True:
                self.visits += 1
                if self.visits > MAX_VISITS:
                    raise _Budget()
                x = insns[k]
                succ = self.step(x, regs, stack, shndx, start, depth)
                if len(succ) == 1 and succ[0] not in joins:
                    j = by_index.get(succ[0])
                    if j is None:
                        break
                    k = j
                    continue
                for target in succ:
                    j = by_index.get(target)
                    if j is None:
                        continue
                    new = (tuple(regs), tuple(sorted(stack.items())))
                    old = states.get(j)
                    if old is None:
                        states[j] = new
                        work.append(j)
                        continue
                    new_stack = dict(new[1])
                    merged = (tuple(_join(a, b) for a, b in zip(old[0], new[0])),
                              tuple((o, _join(v, new_stack[o])) for o, v in old[1]
                                    if o in new_stack))
                    if merged != old:
                        states[j] = merged
                        work.append(j)
                break

    def step(self, x: Insn, regs: list, stack: dict, shndx: int, start: int, depth: int):
        nxt = x.index + x.slots
        c = x.cls
        if x.is_ld_imm64:
            t = self.code.reloc_targets.get((shndx, start + 8 * x.index))
            if t is None:
                regs[x.dst] = ("k", x.imm64)
            elif t[0] == "map":
                regs[x.dst] = ("map", frozenset({t[1]}))
            elif t[0] == "value":
                regs[x.dst] = ("val", frozenset({t[1]}))
                self.record((t[1],), "direct_value")
            elif t[0] == "func":
                regs[x.dst] = ("func", t[1])
            else:
                regs[x.dst] = None
            return [nxt]
        if c in (ALU, ALU64):
            op = x.code & 0xF0
            if c == ALU64 and op == 0xB0:        # mov
                regs[x.dst] = regs[x.src] if x.code & 0x08 else ("k", x.imm)
            elif c == ALU64 and op in (0x00, 0x10) and regs[x.dst] is not None:
                v = regs[x.dst]
                if v[0] == "fp" and not x.code & 0x08:
                    regs[x.dst] = ("fp", v[1] + (x.imm if op == 0x00 else -x.imm))
                elif v[0] in ("map", "val", "any"):
                    pass                                  # a pointer moved within its object
                else:
                    regs[x.dst] = None
            else:
                if _ids(regs[x.dst]):
                    regs[x.dst] = ("any", _ids(regs[x.dst]))
                else:
                    regs[x.dst] = None
            return [nxt]
        if c == LDX:
            base = regs[x.src]
            v = None
            if base is not None and base[0] == "fp" and x.mem_size == 8:
                v = stack.get(base[1] + x.off)
            regs[x.dst] = v
            return [nxt]
        if c in (ST, STX):
            base = regs[x.dst]
            val = regs[x.src] if c == STX else None
            atomic = c == STX and (x.code & 0xE0) == MODE_ATOMIC
            if base is not None and base[0] == "fp":
                off = base[1] + x.off
                if x.mem_size == 8 and not atomic:
                    stack[off] = val
                else:
                    stack.pop(off, None)
                    if _ids(val):
                        self.record(_ids(val), "unknown")
            else:
                if base is not None and base[0] == "val":
                    self.record(base[1], "write_through_pointer")
                elif base is not None and base[0] == "innerval":
                    self.record(base[1], "inner_write_through_pointer")
                elif base is not None and base[0] in ("map", "any"):
                    self.record(base[1], "unknown")
                if _ids(val):           # a map pointer stored where we do not follow it
                    self.record(_ids(val), "unknown")
            if atomic and x.imm & 0x01 or (atomic and x.imm in (0xE1, 0xF1)):
                regs[x.src if x.imm != 0xF1 else 0] = None
            return [nxt]
        if x.is_call:
            return self.call(x, regs, stack, shndx, start, depth, nxt)
        if x.is_exit:
            return []
        if x.is_jump:
            if x.is_conditional:
                return [nxt, x.jump_target]
            return [x.jump_target]
        return [nxt]                                  # legacy packet loads

    def call(self, x: Insn, regs: list, stack: dict, shndx, start, depth, nxt):
        if x.is_helper_call:
            h = _HELPER_BY_ID.get(x.imm)
            kinds = HELPER_ARGS[x.imm] if 0 < x.imm < len(HELPER_ARGS) else None
            result = None
            if kinds is None:                  # a helper we do not know: assume the worst
                for a in regs[1:6]:
                    if _ids(a):
                        self.record(_ids(a), "unknown")
            else:
                name = HELPER_NAMES[x.imm]
                op = h[1] if h else f"helper:{name}"
                if h and h[0]:       # some prototypes say `void *ringbuf` for the map
                    kinds = kinds[:h[0] - 1] + "m" + kinds[h[0]:]
                for r, kind in enumerate(kinds, 1):
                    v = regs[r]
                    if kind == "m":
                        if v is not None and v[0] == "map":
                            o = op if (h is None or h[0] == r) else f"helper:{name}"
                            if x.imm in _FLAG_ARG_HELPERS and regs[4] and regs[4][0] == "k" \
                                    and regs[4][1] & 1:
                                o = "storage_get_create"
                            self.record(v[1], o)
                            if h and h[2] and h[0] == r:
                                result = (("inner", v[1]) if v[1] & self.map_in_map
                                          else ("val", v[1]))
                        elif v is not None and v[0] == "inner":
                            # a map looked up in a map-in-map: the datapath acts on an inner
                            # map, which userspace creates; the outer is only read
                            self.record(v[1], f"inner_{op}")
                            if h and h[2] and h[0] == r:
                                result = ("innerval", v[1])
                        elif _ids(v):
                            self.record(_ids(v), "unknown")
                    elif kind in "pc" and v is not None:
                        if v[0] == "val" and kind == "p":
                            self.record(v[1], "write_through_pointer")
                        elif v[0] == "innerval" and kind == "p":
                            self.record(v[1], "inner_write_through_pointer")
                        elif v[0] in ("map", "any", "inner"):
                            self.record(v[1], "unknown")
                if h and h[3] and regs[h[3]] is not None and regs[h[3]][0] == "func":
                    cb = [None] * 11
                    cb[10] = ("fp", 0)
                    m = regs[h[0]] if h[0] else None
                    if h[1] == "for_each" and m is not None and m[0] == "map":
                        cb[1] = ("map", m[1])
                        cb[3] = ("val", m[1])
                    self.subprogram(regs[h[3]][1], tuple(cb), depth)
            for r in range(0, 6):
                regs[r] = None
            regs[0] = result
            return [nxt]
        if x.is_bpf_call:
            t = self.code.reloc_targets.get((shndx, start + 8 * x.index))
            target = t[1] if t and t[0] == "call" else None
            callee = [None] * 11
            callee[1:6] = regs[1:6]
            callee[10] = ("fp", 0)
            if target is not None:
                self.subprogram(target, tuple(callee), depth)
            else:
                for a in regs[1:6]:
                    if _ids(a):
                        self.record(_ids(a), "unknown")
        else:                                          # kfunc: we do not know what it does
            for a in regs[1:6]:
                if _ids(a):
                    self.record(_ids(a), "unknown")
        for r in range(0, 6):
            regs[r] = None
        return [nxt]

    def subprogram(self, text_off: int, entry: tuple, depth: int) -> None:
        text = self.code.text_idx
        if text is None or self.code.function(text, text_off) is None:
            for v in entry:
                if _ids(v):
                    self.record(_ids(v), "unknown")
            return
        if depth >= MAX_DEPTH:
            for v in entry:
                if _ids(v):
                    self.record(_ids(v), "unknown")
            return
        self.function(text, text_off, entry, depth + 1)


class _Budget(Exception):
    pass


def analyze_code(code: ObjectCode) -> dict[str, MapUse]:
    """Map name -> what the object's programs do with it."""
    a = _Analyzer(code)
    for prog, shndx, sym in code.program_entries():
        a.program(prog.name, shndx, sym.value)
    uses = {code.spec.maps[i].name: u for i, u in a.uses.items()}
    # maps placed in a map-in-map's initial slots get what the programs do to inner maps
    for m in code.spec.maps:
        inner_ops = {op[len("inner_"):]: progs for op, progs in uses[m.name].ops.items()
                     if op.startswith("inner_")}
        for _slot, target in m.init_slots:
            if target in uses and inner_ops:
                for op, progs in inner_ops.items():
                    for p in progs:
                        uses[target].add(op, p)
    return uses


def analyze_object(data: bytes, *, path: str | None = None) -> dict[str, MapUse]:
    return analyze_code(parse_object_code(data, path=path))
