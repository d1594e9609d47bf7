// SPDX-License-Identifier: GPL-2.0
/*
 * map_in_map.c - BPF_MAP_TYPE_ARRAY_OF_MAPS and BPF_MAP_TYPE_HASH_OF_MAPS.
 *
 * Covers: outer maps whose inner map is described with
 * __array(values, struct inner_def):
 *   - outer_arr: array-of-maps with initial slots
 *     (.values = { [1] = &inner_a, [3] = &inner_b }); inner_a/inner_b are
 *     ordinary maps of the same shape that libbpf creates first and then
 *     stores into slots 1 and 3.
 *   - outer_hash: hash-of-maps with an anonymous inner definition and no
 *     initial values; the inner hash is BPF_F_NO_PREALLOC (BPF_F_INNER_MAP
 *     would be rejected: the kernel allows it on arrays only).  The anonymous inner definition
 *     uses key_size/value_size: clang 14 emits struct types reachable only
 *     through the __array() pointer chain as BTF FWD declarations, and
 *     libbpf then fails with "can't determine key size".
 * libbpf also creates a temporary "template" inner map for each outer map
 * (named "<outer>.inner") only to pass its fd as inner_map_fd, and frees it
 * right after the outer map exists.  Outer value_size is always 4 (an fd).
 *
 * Maps (key/value bytes, max_entries, flags):
 *   inner_a       4 / 8      10  0   array
 *   inner_b       4 / 8      10  0   array
 *   outer_arr     4 / 4       8  0   array_of_maps, inner = array 4/8 x10
 *   outer_hash    8 / 4      64  0   hash_of_maps, inner = hash 3/13 x13
 *                                    flags NO_PREALLOC (size-only)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct key3 {
	__u8 b[3];
};

struct val13 {
	__u8 b[13];
};

struct inner_def {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 10);
	__type(key, __u32);
	__type(value, __u64);
};

struct inner_def inner_a SEC(".maps");
struct inner_def inner_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 8);
	__type(key, __u32);
	__array(values, struct inner_def);
} outer_arr SEC(".maps") = {
	.values = {
		[1] = &inner_a,
		[3] = &inner_b,
	},
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 64);
	__type(key, __u64);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_HASH);
		__uint(max_entries, 13);
		__uint(map_flags, BPF_F_NO_PREALLOC);
		__uint(key_size, sizeof(struct key3));
		__uint(value_size, sizeof(struct val13));
	});
} outer_hash SEC(".maps");

SEC("tc")
int map_in_map_tc(struct __sk_buff *skb)
{
	__u32 slot = skb->mark & 7, idx = 0;
	__u64 cookie = skb->hash;
	struct key3 k3 = {};
	struct val13 *v13;
	void *inner;
	__u64 *cnt;

	inner = bpf_map_lookup_elem(&outer_arr, &slot);
	if (inner) {
		cnt = bpf_map_lookup_elem(inner, &idx);
		if (cnt)
			(*cnt)++;
	}
	inner = bpf_map_lookup_elem(&outer_hash, &cookie);
	if (inner) {
		k3.b[0] = skb->protocol;
		v13 = bpf_map_lookup_elem(inner, &k3);
		if (v13)
			v13->b[12]++;
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
