// SPDX-License-Identifier: GPL-2.0
/*
 * agent_pins.c - pinning values and static programs that cilium/ebpf accepts and libbpf
 * refuses.
 *
 * Covers: pinning = 2 (a value Cilium-style agents define for themselves and handle before
 * loading; libbpf accepts only 0 and 1), pinning = 1 (by name), and a static program
 * outside .text (libbpf: "static programs are not supported"; cilium/ebpf loads it). libbpf
 * refuses the object as a whole, so the default loader is cilium/ebpf.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
	__uint(pinning, 2);
} policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} stats SEC(".maps");

SEC("tc")
static int classify(struct __sk_buff *skb)
{
	__u64 k = skb->mark, *v = bpf_map_lookup_elem(&policy, &k);
	__u32 i = 0;
	__u64 *s = bpf_map_lookup_elem(&stats, &i);

	if (s)
		(*s)++;
	return v ? 0 : 2;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
