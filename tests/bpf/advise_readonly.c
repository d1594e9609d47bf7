// SPDX-License-Identifier: GPL-2.0
/*
 * advise_readonly.c - advisor fixture: maps the datapath only reads.
 *
 * Covers: maps only looked up, whose lookup result is only read (loads,
 * compares) and never written, from XDP and tc; a .rodata config
 * (const volatile) read by both programs; and a map no program touches.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   ro_lookup_xdp    HASH   4 / 8   256  0   ro_xdp  lookup, value only read
 *   ro_lookup_tc     HASH   4 / 16  256  0   ro_tc   lookup, value only read
 *   unused_map       HASH   4 / 8    64  0   (no program)
 *   advise_r.rodata  ARRAY  4 / 8     1  RDONLY_PROG|MMAPABLE  ro_xdp, ro_tc
 *                    (libbpf's name for .rodata of object "advise_readonly")
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct route {
	__u32 ifindex;
	__u32 flags;
	__u64 mtu;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} ro_lookup_xdp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct route);
} ro_lookup_tc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} unused_map SEC(".maps");

/* .rodata */
const volatile __u32 cfg_drop_limit = 1500;
const volatile __u32 cfg_mark = 7;

SEC("xdp")
int ro_xdp(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index;
	__u64 *limit;

	limit = bpf_map_lookup_elem(&ro_lookup_xdp, &key);
	if (limit && ctx->data_end - ctx->data > *limit)
		return XDP_DROP;
	if (ctx->data_end - ctx->data > cfg_drop_limit)
		return XDP_DROP;
	return XDP_PASS;
}

SEC("tc")
int ro_tc(struct __sk_buff *skb)
{
	__u32 key = skb->ifindex;
	struct route *r;

	r = bpf_map_lookup_elem(&ro_lookup_tc, &key);
	if (!r)
		return TC_ACT_OK;
	if (skb->len > r->mtu || (r->flags & 1) || skb->mark == cfg_mark)
		return TC_ACT_SHOT;
	return bpf_redirect(r->ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
