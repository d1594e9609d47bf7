// SPDX-License-Identifier: GPL-2.0
/*
 * callbacks.c - programs that reach maps only through helper callbacks.
 *
 * Covers callback functions passed to helpers as BPF_PSEUDO_FUNC ld_imm64
 * (static functions clang places in .text; libbpf appends them to the
 * program that takes their address, and -g gives the BTF func info the
 * verifier needs for them):
 *   - cb_loop: bpf_loop() callback of cb_xdp_loop; the program itself
 *     touches no map, loop_counts is referenced only from the callback;
 *   - cb_walk: bpf_for_each_map_elem() callback of cb_tc_walk; walk_map is
 *     referenced directly by the program (the helper's map argument),
 *     walk_sums only from the callback;
 *   - cb_timer: bpf_timer_set_callback() callback of cb_xdp_timer; timers
 *     (whose value holds a struct bpf_timer) is referenced by the program,
 *     timer_hits only from the callback.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   loop_counts  4 / 8    8   0      array, touched only from cb_loop()
 *   walk_map     4 / 8    16  0      array, iterated by cb_tc_walk
 *   walk_sums    4 / 8    16  0      hash, touched only from cb_walk()
 *   timers       4 / 16   1   0      array, value is struct elem (bpf_timer)
 *   timer_hits   4 / 8    1   0      array, touched only from cb_timer()
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define CLOCK_MONOTONIC 1

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} loop_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} walk_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} walk_sums SEC(".maps");

struct elem {
	struct bpf_timer t;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct elem);
} timers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} timer_hits SEC(".maps");

/* bpf_loop: long (*)(__u32 index, void *ctx); 0 continues, 1 stops */
static long cb_loop(__u32 index, void *ctx)
{
	__u32 key = index & 7;
	__u64 *c = bpf_map_lookup_elem(&loop_counts, &key);

	if (c)
		__sync_fetch_and_add(c, 1);
	else
		bpf_map_update_elem(&loop_counts, &key, &(__u64){1}, BPF_ANY);
	return 0;
}

SEC("xdp")
int cb_xdp_loop(struct xdp_md *ctx)
{
	bpf_loop(4, cb_loop, NULL, 0);
	return XDP_PASS;
}

/* bpf_for_each_map_elem: long (*)(map, key, value, ctx); 0 continues */
static long cb_walk(void *map, __u32 *key, __u64 *val, void *ctx)
{
	__u64 sum = *val;

	bpf_map_update_elem(&walk_sums, key, &sum, BPF_ANY);
	return 0;
}

SEC("tc")
int cb_tc_walk(struct __sk_buff *skb)
{
	bpf_for_each_map_elem(&walk_map, cb_walk, NULL, 0);
	return 0;
}

/* bpf_timer callback: int (*)(map, key, value) */
static int cb_timer(void *map, __u32 *key, struct elem *val)
{
	__u32 k = 0;
	__u64 *c = bpf_map_lookup_elem(&timer_hits, &k);

	if (c)
		__sync_fetch_and_add(c, 1);
	return 0;
}

SEC("xdp")
int cb_xdp_timer(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct elem *e = bpf_map_lookup_elem(&timers, &key);

	if (!e)
		return XDP_PASS;
	bpf_timer_init(&e->t, &timers, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&e->t, cb_timer);
	bpf_timer_start(&e->t, 1000000, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
