// SPDX-License-Identifier: GPL-2.0
/*
 * array_basic.c - BPF_MAP_TYPE_ARRAY and BPF_MAP_TYPE_PERCPU_ARRAY.
 *
 * Covers: plain and per-CPU arrays with BTF key/value types, value sizes
 * that are not multiples of 8 (the kernel rounds array slots up to 8
 * bytes; per-CPU values are replicated for every possible CPU).
 *
 * Maps (key/value bytes, max_entries, flags):
 *   array_v100         4 / 100     7  0
 *   array_v3           4 / 3      65  0
 *   pcpu_array_v13     4 / 13     33  0
 *   pcpu_array_v8      4 / 8    1024  0
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct val100 {
	__u8 blob[100];
};

struct val3 {
	__u8 b[3];
};

struct val13 {
	__u32 a;
	__u32 b;
	__u8 c[5];
} __attribute__((packed));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 7);
	__type(key, __u32);
	__type(value, struct val100);
} array_v100 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65);
	__type(key, __u32);
	__type(value, struct val3);
} array_v3 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 33);
	__type(key, __u32);
	__type(value, struct val13);
} pcpu_array_v13 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} pcpu_array_v8 SEC(".maps");

SEC("socket")
int array_basic_sock(struct __sk_buff *skb)
{
	__u32 idx = skb->len & 63;
	struct val100 *v100;
	struct val3 *v3;
	struct val13 *v13;
	__u64 *cnt;

	v100 = bpf_map_lookup_elem(&array_v100, &idx);
	if (v100)
		v100->blob[0] = 1;
	v3 = bpf_map_lookup_elem(&array_v3, &idx);
	if (v3)
		v3->b[2]++;
	v13 = bpf_map_lookup_elem(&pcpu_array_v13, &idx);
	if (v13)
		v13->a += skb->len;
	cnt = bpf_map_lookup_elem(&pcpu_array_v8, &idx);
	if (cnt)
		(*cnt)++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
