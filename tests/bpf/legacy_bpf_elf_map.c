// SPDX-License-Identifier: GPL-2.0
/*
 * legacy_bpf_elf_map.c - legacy SEC("maps") with iproute2 struct bpf_elf_map.
 *
 * Covers: the iproute2 / old Cilium tc loader format: 36-byte records
 * {type, size_key, size_value, max_elem, flags, id, pinning, inner_id,
 * inner_idx} (nine __u32) in an ELF section named "maps".  pinning uses
 * iproute2's values (0 none, 1 object namespace, 2 global namespace).
 * Map-in-map is expressed with ids: the outer map's inner_id names the id
 * of its inner map template; the inner map's inner_idx is the outer slot it
 * is placed in.  Programs use the old "classifier" / "action" sections.
 *
 * NOT openable by libbpf 1.1 (expected): libbpf 1.0 dropped legacy map
 * support ("elf: legacy map definitions in 'maps' section are not
 * supported by libbpf v1.0+"); libbpf never understood the 36-byte layout
 * anyway - iproute2's own ELF loader did.
 *
 * Maps (key/value bytes, max_elem, flags, id/pinning/inner_id/inner_idx):
 *   elf_policy       8 / 13    4096  NO_PREALLOC  0/2/0/0
 *   elf_calls        4 / 4       16  0            0/2/0/0  prog_array
 *   elf_inner        4 / 7        3  0            7/1/0/1  array (inner)
 *   elf_outer        4 / 4        4  0            0/1/7/0  array_of_maps
 *   elf_counters     4 / 8      100  0            0/0/0/0  percpu_array
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct bpf_elf_map {
	__u32 type;
	__u32 size_key;
	__u32 size_value;
	__u32 max_elem;
	__u32 flags;
	__u32 id;
	__u32 pinning;
	__u32 inner_id;
	__u32 inner_idx;
};

#define PIN_NONE 0
#define PIN_OBJECT_NS 1
#define PIN_GLOBAL_NS 2

#define ELF_INNER_ID 7

struct bpf_elf_map SEC("maps") elf_policy = {
	.type = BPF_MAP_TYPE_HASH,
	.size_key = sizeof(__u64),
	.size_value = 13,
	.max_elem = 4096,
	.flags = BPF_F_NO_PREALLOC,
	.pinning = PIN_GLOBAL_NS,
};

struct bpf_elf_map SEC("maps") elf_calls = {
	.type = BPF_MAP_TYPE_PROG_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u32),
	.max_elem = 16,
	.pinning = PIN_GLOBAL_NS,
};

struct bpf_elf_map SEC("maps") elf_inner = {
	.type = BPF_MAP_TYPE_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = 7,
	.max_elem = 3,
	.id = ELF_INNER_ID,
	.pinning = PIN_OBJECT_NS,
	.inner_idx = 1,
};

struct bpf_elf_map SEC("maps") elf_outer = {
	.type = BPF_MAP_TYPE_ARRAY_OF_MAPS,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u32),
	.max_elem = 4,
	.pinning = PIN_OBJECT_NS,
	.inner_id = ELF_INNER_ID,
};

struct bpf_elf_map SEC("maps") elf_counters = {
	.type = BPF_MAP_TYPE_PERCPU_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u64),
	.max_elem = 100,
};

SEC("classifier")
int legacy_elf_cls(struct __sk_buff *skb)
{
	__u64 key = skb->hash;
	__u32 idx = skb->mark & 3, zero = 0;
	__u64 *cnt;
	void *inner;

	if (bpf_map_lookup_elem(&elf_policy, &key))
		return TC_ACT_SHOT;
	cnt = bpf_map_lookup_elem(&elf_counters, &idx);
	if (cnt)
		(*cnt)++;
	inner = bpf_map_lookup_elem(&elf_outer, &idx);
	if (inner && bpf_map_lookup_elem(inner, &zero))
		return TC_ACT_OK;
	bpf_tail_call(skb, &elf_calls, idx);
	return TC_ACT_OK;
}

SEC("action")
int legacy_elf_act(struct __sk_buff *skb)
{
	__u32 idx = 1;
	__u64 *cnt = bpf_map_lookup_elem(&elf_counters, &idx);

	if (cnt)
		(*cnt)++;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
