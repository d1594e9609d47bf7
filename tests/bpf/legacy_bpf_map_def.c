// SPDX-License-Identifier: GPL-2.0
/*
 * legacy_bpf_map_def.c - legacy SEC("maps") with libbpf-0.x struct bpf_map_def.
 *
 * Covers: the pre-BTF map definition style: each map is a 20-byte record
 * {type, key_size, value_size, max_entries, map_flags} (five __u32) in an
 * ELF section named "maps"; the map name is the ELF symbol name and the
 * record offset is the symbol value.  The struct is defined here because
 * libbpf 1.x removed it from its headers.
 *
 * NOT openable by libbpf 1.1 (expected): libbpf 1.0 dropped legacy map
 * support and bpf_object__open fails with "elf: legacy map definitions in
 * 'maps' section are not supported by libbpf v1.0+".
 *
 * Maps (key/value bytes, max_entries, flags):
 *   legacy_hash         4 / 13    1024  NO_PREALLOC
 *   legacy_array        4 / 100      7  0
 *   legacy_prog_array   4 / 4        8  0
 *   legacy_perf         4 / 4       64  0
 *   legacy_lru          8 / 7      333  NO_COMMON_LRU
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct bpf_map_def {
	__u32 type;
	__u32 key_size;
	__u32 value_size;
	__u32 max_entries;
	__u32 map_flags;
};

struct bpf_map_def SEC("maps") legacy_hash = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u32),
	.value_size = 13,
	.max_entries = 1024,
	.map_flags = BPF_F_NO_PREALLOC,
};

struct bpf_map_def SEC("maps") legacy_array = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = 100,
	.max_entries = 7,
};

struct bpf_map_def SEC("maps") legacy_prog_array = {
	.type = BPF_MAP_TYPE_PROG_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u32),
	.max_entries = 8,
};

struct bpf_map_def SEC("maps") legacy_perf = {
	.type = BPF_MAP_TYPE_PERF_EVENT_ARRAY,
	.key_size = sizeof(int),
	.value_size = sizeof(__u32),
	.max_entries = 64,
};

struct bpf_map_def SEC("maps") legacy_lru = {
	.type = BPF_MAP_TYPE_LRU_HASH,
	.key_size = sizeof(__u64),
	.value_size = 7,
	.max_entries = 333,
	.map_flags = BPF_F_NO_COMMON_LRU,
};

SEC("socket")
int legacy_map_def_sock(struct __sk_buff *skb)
{
	__u32 k = skb->len & 7;
	__u64 k8 = skb->hash;
	__u8 v7[7] = {};
	__u8 *v;

	v = bpf_map_lookup_elem(&legacy_hash, &k);
	if (v)
		v[12]++;
	v = bpf_map_lookup_elem(&legacy_array, &k);
	if (v)
		v[99]++;
	bpf_map_update_elem(&legacy_lru, &k8, v7, BPF_ANY);
	bpf_perf_event_output(skb, &legacy_perf, BPF_F_CURRENT_CPU, &k, sizeof(k));
	bpf_tail_call(skb, &legacy_prog_array, k);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
