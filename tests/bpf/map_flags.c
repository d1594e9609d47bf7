// SPDX-License-Identifier: GPL-2.0
/*
 * map_flags.c - map_flags and numa_node in BTF map definitions.
 *
 * Covers: __uint(map_flags, ...) with BPF_F_NUMA_NODE (+ __uint(numa_node)),
 * BPF_F_ZERO_SEED, BPF_F_RDONLY_PROG, BPF_F_WRONLY_PROG, BPF_F_MMAPABLE and
 * a combination of flags.  numa_node is 0 because node 0 is the only node
 * guaranteed to be online (per-CPU hashes would reject BPF_F_NUMA_NODE).
 * "wronly_prog_hash" is 16 characters: the kernel keeps only the first 15
 * ("wronly_prog_has"), libbpf's bpf_map__name() keeps the full name.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   numa_hash         4 / 8     256  NUMA_NODE (numa_node 0)
 *   zero_seed_hash    7 / 3     128  ZERO_SEED
 *   rdonly_prog_arr   4 / 13      5  RDONLY_PROG
 *   wronly_prog_hash  4 / 100    50  WRONLY_PROG
 *   mmapable_array    4 / 8    1000  MMAPABLE
 *   combo_hash       13 / 7     300  NO_PREALLOC|NUMA_NODE|ZERO_SEED (numa_node 0)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct key7 {
	__u8 b[7];
};

struct key13 {
	__u8 b[13];
};

struct val3 {
	__u8 b[3];
};

struct val7 {
	__u8 b[7];
};

struct val13 {
	__u8 b[13];
};

struct val100 {
	__u8 b[100];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NUMA_NODE);
	__uint(numa_node, 0);
	__type(key, __u32);
	__type(value, __u64);
} numa_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 128);
	__uint(map_flags, BPF_F_ZERO_SEED);
	__type(key, struct key7);
	__type(value, struct val3);
} zero_seed_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__uint(map_flags, BPF_F_RDONLY_PROG);
	__type(key, __u32);
	__type(value, struct val13);
} rdonly_prog_arr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 50);
	__uint(map_flags, BPF_F_WRONLY_PROG);
	__type(key, __u32);
	__type(value, struct val100);
} wronly_prog_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1000);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} mmapable_array SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 300);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_NUMA_NODE | BPF_F_ZERO_SEED);
	__uint(numa_node, 0);
	__type(key, struct key13);
	__type(value, struct val7);
} combo_hash SEC(".maps");

SEC("tc")
int map_flags_tc(struct __sk_buff *skb)
{
	__u32 k = skb->mark;
	struct key7 k7 = {};
	struct key13 k13 = {};
	struct val3 v3 = {};
	struct val7 v7 = {};
	struct val13 *ro;
	struct val100 v100 = {};
	__u64 one = 1, *slot;

	k7.b[0] = k;
	k13.b[12] = k;
	bpf_map_update_elem(&numa_hash, &k, &one, BPF_ANY);
	bpf_map_update_elem(&zero_seed_hash, &k7, &v3, BPF_ANY);
	ro = bpf_map_lookup_elem(&rdonly_prog_arr, &k);
	if (ro && ro->b[0])
		return 2;	/* TC_ACT_SHOT */
	bpf_map_update_elem(&wronly_prog_hash, &k, &v100, BPF_ANY);
	slot = bpf_map_lookup_elem(&mmapable_array, &k);
	if (slot)
		__sync_fetch_and_add(slot, 1);
	bpf_map_update_elem(&combo_hash, &k13, &v7, BPF_NOEXIST);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
