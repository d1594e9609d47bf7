// SPDX-License-Identifier: GPL-2.0
/*
 * struct_ops_link.c - a struct_ops map in SEC(".struct_ops.link"), the only struct_ops
 * section current cilium/ebpf reads (a plain ".struct_ops" section makes it refuse the
 * object; 0.9.1 ignores both and creates no struct_ops map).
 *
 * Maps: link_cc (STRUCT_OPS, key 4, value the object's struct size until the kernel's
 * struct is known at load, BPF_F_LINK), calls (percpu array).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct sock;

struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	__u32 (*undo_cwnd)(struct sock *sk);
	char name[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} calls SEC(".maps");

SEC("struct_ops/link_ssthresh")
__u32 link_ssthresh(unsigned long long *ctx)
{
	__u32 i = 0;
	__u64 *c = bpf_map_lookup_elem(&calls, &i);

	if (c)
		(*c)++;
	return 10;
}

SEC("struct_ops/link_undo_cwnd")
__u32 link_undo_cwnd(unsigned long long *ctx)
{
	return 10;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops link_cc = {
	.ssthresh = (void *)link_ssthresh,
	.undo_cwnd = (void *)link_undo_cwnd,
	.name = "bpfmem_link",
};

char LICENSE[] SEC("license") = "Dual MIT/GPL";
