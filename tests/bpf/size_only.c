// SPDX-License-Identifier: GPL-2.0
/*
 * size_only.c - BTF map definitions that give sizes instead of types.
 *
 * Covers: __uint(key_size, N) / __uint(value_size, N) (no BTF key/value
 * type ids are passed to the kernel) and the mixed form where the key is a
 * BTF type but the value is only a size (and vice versa).
 *
 * libbpf 1.1 note: for the two mixed maps libbpf passes one BTF type id and
 * a zero for the other; the kernel rejects that (EINVAL) and libbpf logs
 * "Error in bpf_create_map_xattr(...). Retrying without BTF." and then
 * creates the map without any BTF ids.  Loading still succeeds.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   sz_hash_k7_v100    7 / 100    333  0            key_size + value_size
 *   sz_array_v3        4 / 3       10  0            key_size + value_size
 *   sz_pcpu_hash_k3   3 / 13     100  NO_PREALLOC  key_size + value_size
 *   mixed_key_type     4 / 7       42  0            __type(key) + value_size
 *   mixed_val_type    13 / 8       21  0            key_size + __type(value)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 333);
	__uint(key_size, 7);
	__uint(value_size, 100);
} sz_hash_k7_v100 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 10);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 3);
} sz_array_v3 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 100);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, 3);
	__uint(value_size, 13);
} sz_pcpu_hash_k3 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 42);
	__type(key, __u32);
	__uint(value_size, 7);
} mixed_key_type SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 21);
	__uint(key_size, 13);
	__type(value, __u64);
} mixed_val_type SEC(".maps");

SEC("socket")
int size_only_sock(struct __sk_buff *skb)
{
	__u8 key7[7] = {}, key3[3] = {}, key13[13] = {};
	__u8 val7[7] = {}, val13[13] = {};
	__u32 k = skb->len & 7;
	__u8 *v;
	__u64 *cnt;

	key7[0] = skb->protocol;
	key3[0] = skb->pkt_type;
	key13[12] = skb->mark;
	v = bpf_map_lookup_elem(&sz_hash_k7_v100, key7);
	if (v)
		v[99] = 1;
	v = bpf_map_lookup_elem(&sz_array_v3, &k);
	if (v)
		v[2]++;
	bpf_map_update_elem(&sz_pcpu_hash_k3, key3, val13, BPF_ANY);
	bpf_map_update_elem(&mixed_key_type, &k, val7, BPF_ANY);
	cnt = bpf_map_lookup_elem(&mixed_val_type, key13);
	if (cnt)
		(*cnt)++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
