// SPDX-License-Identifier: GPL-2.0
/*
 * percpu_lru.c - BPF_MAP_TYPE_PERCPU_HASH, LRU_HASH and LRU_PERCPU_HASH.
 *
 * Covers: per-CPU hashes (preallocated and BPF_F_NO_PREALLOC), LRU hashes
 * with the common LRU list and with BPF_F_NO_COMMON_LRU.  With
 * BPF_F_NO_COMMON_LRU the kernel rounds max_entries up to a multiple of
 * the number of possible CPUs (999 -> 1000, 1001 -> 1002 on a 2-CPU box).
 * LRU maps are always preallocated (BPF_F_NO_PREALLOC is rejected).
 *
 * Maps (key/value bytes, max_entries, flags):
 *   pcpu_hash_k13_v3    13 / 3      511  0
 *   pcpu_hash_nopre      4 / 100     64  NO_PREALLOC
 *   lru_hash_k16_v100   16 / 100   2048  0
 *   lru_hash_nocommon    3 / 7      999  NO_COMMON_LRU
 *   lru_pcpu_common      4 / 13     300  0
 *   lru_pcpu_nocommon    8 / 7     1001  NO_COMMON_LRU
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct key3 {
	__u8 b[3];
};

struct key13 {
	__u32 saddr;
	__u32 daddr;
	__u32 ports;
	__u8 proto;
} __attribute__((packed));

struct key16 {
	__u64 cookie;
	__u32 ifindex;
	__u32 pad;
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
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 511);
	__type(key, struct key13);
	__type(value, struct val3);
} pcpu_hash_k13_v3 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 64);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct val100);
} pcpu_hash_nopre SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2048);
	__type(key, struct key16);
	__type(value, struct val100);
} lru_hash_k16_v100 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 999);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
	__type(key, struct key3);
	__type(value, struct val7);
} lru_hash_nocommon SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 300);
	__type(key, __u32);
	__type(value, struct val13);
} lru_pcpu_common SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 1001);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
	__type(key, __u64);
	__type(value, struct val7);
} lru_pcpu_nocommon SEC(".maps");

SEC("tc")
int percpu_lru_tc(struct __sk_buff *skb)
{
	struct key13 k13 = {};
	struct key16 k16 = {};
	struct key3 k3 = {};
	struct val3 v3 = {};
	struct val7 v7 = {};
	struct val13 v13 = {};
	struct val100 *v100;
	__u32 k = skb->ifindex;
	__u64 k8 = skb->hash;

	k13.saddr = skb->hash;
	k13.daddr = skb->mark;
	k13.proto = skb->protocol;
	k16.ifindex = skb->ifindex;
	k3.b[1] = skb->mark;

	bpf_map_update_elem(&pcpu_hash_k13_v3, &k13, &v3, BPF_ANY);
	v100 = bpf_map_lookup_elem(&pcpu_hash_nopre, &k);
	if (v100)
		v100->b[99]++;
	v100 = bpf_map_lookup_elem(&lru_hash_k16_v100, &k16);
	if (v100)
		v100->b[0]++;
	bpf_map_update_elem(&lru_hash_nocommon, &k3, &v7, BPF_ANY);
	bpf_map_update_elem(&lru_pcpu_common, &k, &v13, BPF_ANY);
	bpf_map_update_elem(&lru_pcpu_nocommon, &k8, &v7, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
