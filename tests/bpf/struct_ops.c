// SPDX-License-Identifier: GPL-2.0
/*
 * struct_ops.c - BPF_MAP_TYPE_STRUCT_OPS (a minimal tcp_congestion_ops).
 *
 * Covers: a map defined as a global struct variable in SEC(".struct_ops")
 * whose function-pointer members point at SEC("struct_ops/...") programs,
 * plus a data member (.name).  Only the members we use are declared; libbpf
 * matches them by name against the kernel's vmlinux BTF at open time (so
 * opening needs /sys/kernel/btf/vmlinux).  The created map has key_size 4,
 * max_entries 1 and value_size = sizeof(struct bpf_struct_ops_tcp_congestion_ops)
 * from vmlinux BTF (256 on this 6.18 kernel) - not the 40 bytes of the
 * local struct; btf_vmlinux_value_type_id is set, no BTF key/value ids.
 * The programs also update an ordinary map (cc_calls).
 *
 * libbpf 1.1 bug worked around here: libbpf only loads vmlinux BTF at
 * bpf_object__load() time if an *autoloaded* program needs it or the object
 * has CO-RE relocations; struct_ops map setup then dereferences the missing
 * vmlinux BTF and segfaults when every program has autoload off.  The
 * bpf_core_field_exists() check in bpfmem_ssthresh adds one CO-RE
 * relocation (.BTF.ext core_relo) which forces vmlinux BTF to be loaded.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   bpfmem_cc   4 / 256 (kernel-defined)  1  0   struct_ops
 *   cc_calls    4 / 8                     4  0   percpu_array
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* CO-RE view of the kernel's struct sock: only the field we probe */
struct sock {
	__u32 sk_mark;
} __attribute__((preserve_access_index));

/* subset of the kernel's struct tcp_congestion_ops (matched by name) */
struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	__u32 (*undo_cwnd)(struct sock *sk);
	char name[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} cc_calls SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&cc_calls, &idx);

	if (c)
		(*c)++;
}

SEC("struct_ops/bpfmem_ssthresh")
__u32 bpfmem_ssthresh(unsigned long long *ctx)
{
	count(0);
	if (bpf_core_field_exists(((struct sock *)0)->sk_mark))
		count(3);
	return 10;
}

SEC("struct_ops/bpfmem_cong_avoid")
void bpfmem_cong_avoid(unsigned long long *ctx)
{
	count(1);
}

SEC("struct_ops/bpfmem_undo_cwnd")
__u32 bpfmem_undo_cwnd(unsigned long long *ctx)
{
	count(2);
	return 10;
}

SEC(".struct_ops")
struct tcp_congestion_ops bpfmem_cc = {
	.ssthresh = (void *)bpfmem_ssthresh,
	.cong_avoid = (void *)bpfmem_cong_avoid,
	.undo_cwnd = (void *)bpfmem_undo_cwnd,
	.name = "bpfmem_cc",
};

char LICENSE[] SEC("license") = "GPL";
