// SPDX-License-Identifier: GPL-2.0
/*
 * pinning.c - __uint(pinning, LIBBPF_PIN_BY_NAME).
 *
 * Covers: maps that libbpf pins as <pin_root_path>/<map name> (default
 * root /sys/fs/bpf): on load it reuses an existing compatible pinned map
 * instead of creating one, otherwise creates and pins it.  Also an explicit
 * LIBBPF_PIN_NONE.  (Our load checks clear every pin path first, so nothing
 * is pinned.)
 *
 * Maps (key/value bytes, max_entries, flags, pinning):
 *   pinned_policy   16 / 13   4096  0            BY_NAME
 *   pinned_stats     4 / 8      64  0            BY_NAME  (percpu_array)
 *   pinned_lru       8 / 100  2000  0            BY_NAME  (lru_hash)
 *   not_pinned       4 / 7      10  0            NONE
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct policy_key {
	__u32 src;
	__u32 dst;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct val13 {
	__u8 b[13];
};

struct val7 {
	__u8 b[7];
};

struct val100 {
	__u8 b[100];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, struct policy_key);
	__type(value, struct val13);
} pinned_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u32);
	__type(value, __u64);
} pinned_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2000);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u64);
	__type(value, struct val100);
} pinned_lru SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 10);
	__uint(pinning, LIBBPF_PIN_NONE);
	__type(key, __u32);
	__type(value, struct val7);
} not_pinned SEC(".maps");

SEC("tc")
int pinning_tc(struct __sk_buff *skb)
{
	struct policy_key pk = {};
	__u32 idx = skb->queue_mapping & 63;
	__u64 cookie = skb->hash;
	struct val7 *v7;
	__u64 *cnt;

	pk.src = skb->mark;
	pk.proto = skb->protocol;
	if (bpf_map_lookup_elem(&pinned_policy, &pk))
		return 2;
	cnt = bpf_map_lookup_elem(&pinned_stats, &idx);
	if (cnt)
		(*cnt)++;
	if (!bpf_map_lookup_elem(&pinned_lru, &cookie))
		return 0;
	v7 = bpf_map_lookup_elem(&not_pinned, &idx);
	if (v7)
		v7->b[0]++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
