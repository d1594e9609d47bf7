// SPDX-License-Identifier: GPL-2.0
/*
 * advise_indirect.c - advisor fixture: map pointers that do not reach the
 * helper call straight from their ld_imm64.
 *
 * Covers:
 *   - a map pointer passed as an argument to a static __noinline
 *     subprogram (a bpf-to-bpf call) that updates the map, and one that
 *     only looks it up and reads the value;
 *   - one bpf_map_update_elem() call site whose map is chosen by a branch
 *     on packet metadata (both maps reach the same call);
 *   - a map pointer stored to the stack and loaded back before the update.
 * The subprogram arguments go through an empty asm barrier (HIDE) first:
 * without it clang 14 propagates the constant map address into each
 * single-caller static subprogram (IPSCCP), drops the argument and loads
 * the map inside the callee.  The select needs no barrier: with a
 * condition read from the context clang keeps one call site and picks
 * the map with a conditional jump between the two ld_imm64.
 * The stack round trip is a volatile local: left alone, clang 14 does not
 * spill a map pointer even under register pressure (six values live
 * across a helper call), it re-emits the ld_imm64 where it is needed.
 *
 * Maps (key/value bytes, max_entries, flags) - all BPF_MAP_TYPE_HASH:
 *   subprog_updated   4 / 8   1024  0   sub_tc     update in subprogram bump()
 *   subprog_lookup    4 / 8   1024  0   sub_tc     lookup in subprogram peek()
 *   branch_a          4 / 8   1024  0   branch_xdp update, one arm of the select
 *   branch_b          4 / 8   1024  0   branch_xdp update, other arm
 *   spilled_updated   4 / 8   1024  0   spill_xdp  update through a stack slot
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

/* make clang forget where a pointer came from (no instruction emitted) */
#define HIDE(p) asm volatile("" : "+r"(p))

#define HASH_U32_U64(name)				\
	struct {					\
		__uint(type, BPF_MAP_TYPE_HASH);	\
		__uint(max_entries, 1024);		\
		__type(key, __u32);			\
		__type(value, __u64);			\
	} name SEC(".maps")

HASH_U32_U64(subprog_updated);
HASH_U32_U64(subprog_lookup);
HASH_U32_U64(branch_a);
HASH_U32_U64(branch_b);
HASH_U32_U64(spilled_updated);

static __noinline int bump(void *map, __u32 key, __u64 val)
{
	return bpf_map_update_elem(map, &key, &val, BPF_ANY);
}

static __noinline __u64 peek(void *map, __u32 key)
{
	__u64 *v = bpf_map_lookup_elem(map, &key);

	return v ? *v : 0;
}

SEC("tc")
int sub_tc(struct __sk_buff *skb)
{
	void *upd = &subprog_updated;
	void *look = &subprog_lookup;
	__u64 limit;

	HIDE(upd);
	HIDE(look);
	bump(upd, skb->ifindex, skb->len);
	limit = peek(look, skb->ifindex);
	return limit && skb->len > limit ? TC_ACT_SHOT : TC_ACT_OK;
}

SEC("xdp")
int branch_xdp(struct xdp_md *ctx)
{
	__u32 key = ctx->ingress_ifindex;
	__u64 val = ctx->data_end - ctx->data;
	void *m = (ctx->rx_queue_index & 1) ? (void *)&branch_a : (void *)&branch_b;

	bpf_map_update_elem(m, &key, &val, BPF_ANY);
	return XDP_PASS;
}

SEC("xdp")
int spill_xdp(struct xdp_md *ctx)
{
	void *volatile slot = &spilled_updated;
	__u32 key = ctx->rx_queue_index;
	__u64 val = ctx->data_end - ctx->data;

	bpf_map_update_elem(slot, &key, &val, BPF_ANY);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
