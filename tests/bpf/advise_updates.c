// SPDX-License-Identifier: GPL-2.0
/*
 * advise_updates.c - advisor fixture: maps the datapath writes directly.
 *
 * Covers: bpf_map_update_elem() from each program type the advisor must
 * handle (XDP, tc, kprobe, tracepoint, cgroup_skb), bpf_map_delete_elem(),
 * and a value modified through the pointer bpf_map_lookup_elem() returned
 * (a plain load/add/store and an atomic add).  Every map is touched by one
 * program only and each program touches one map only, so the expected
 * verdicts in tests/advise_truth.py follow from this file alone.
 *
 * Maps (key/value bytes, max_entries, flags) - all BPF_MAP_TYPE_HASH:
 *   xdp_updated        4 / 8   1024  0   upd_xdp     update
 *   tc_updated         4 / 8   1024  0   upd_tc      update
 *   kprobe_updated     4 / 8   1024  0   upd_kprobe  update
 *   tp_updated         4 / 8   1024  0   upd_tp      update
 *   cgroup_updated     4 / 8   1024  0   upd_cgroup  update
 *   deleted_map        4 / 8   1024  0   del_tc      delete
 *   write_through_ptr  4 / 16  1024  0   wtp_xdp     lookup, store + atomic add
 *                                        through the returned pointer
 * (write_through_ptr is 17 characters: the kernel calls it "write_through_p".)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct counter {
	__u64 packets;
	__u64 bytes;
};

#define HASH_U32_U64(name)				\
	struct {					\
		__uint(type, BPF_MAP_TYPE_HASH);	\
		__uint(max_entries, 1024);		\
		__type(key, __u32);			\
		__type(value, __u64);			\
	} name SEC(".maps")

HASH_U32_U64(xdp_updated);
HASH_U32_U64(tc_updated);
HASH_U32_U64(kprobe_updated);
HASH_U32_U64(tp_updated);
HASH_U32_U64(cgroup_updated);
HASH_U32_U64(deleted_map);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct counter);
} write_through_ptr SEC(".maps");

SEC("xdp")
int upd_xdp(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index;
	__u64 val = ctx->data_end - ctx->data;

	bpf_map_update_elem(&xdp_updated, &key, &val, BPF_ANY);
	return XDP_PASS;
}

SEC("tc")
int upd_tc(struct __sk_buff *skb)
{
	__u32 key = skb->ifindex;
	__u64 val = skb->len;

	bpf_map_update_elem(&tc_updated, &key, &val, BPF_ANY);
	return TC_ACT_OK;
}

SEC("kprobe/do_sys_openat2")
int upd_kprobe(void *ctx)
{
	__u32 key = bpf_get_current_pid_tgid() >> 32;
	__u64 val = bpf_ktime_get_ns();

	bpf_map_update_elem(&kprobe_updated, &key, &val, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_openat")
int upd_tp(void *ctx)
{
	__u32 key = bpf_get_current_pid_tgid();
	__u64 val = bpf_ktime_get_ns();

	bpf_map_update_elem(&tp_updated, &key, &val, BPF_NOEXIST);
	return 0;
}

SEC("cgroup_skb/egress")
int upd_cgroup(struct __sk_buff *skb)
{
	__u32 key = skb->protocol;
	__u64 val = skb->len;

	bpf_map_update_elem(&cgroup_updated, &key, &val, BPF_ANY);
	return 1;
}

SEC("tc")
int del_tc(struct __sk_buff *skb)
{
	__u32 key = skb->mark;

	bpf_map_delete_elem(&deleted_map, &key);
	return TC_ACT_OK;
}

SEC("xdp")
int wtp_xdp(struct xdp_md *ctx)
{
	__u32 key = ctx->ingress_ifindex;
	struct counter *c;

	c = bpf_map_lookup_elem(&write_through_ptr, &key);
	if (c) {
		c->packets++;
		__sync_fetch_and_add(&c->bytes, ctx->data_end - ctx->data);
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
