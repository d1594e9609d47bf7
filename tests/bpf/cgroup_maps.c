// SPDX-License-Identifier: GPL-2.0
/*
 * cgroup_maps.c - CGROUP_ARRAY, CGROUP_STORAGE and PERCPU_CGROUP_STORAGE.
 *
 * Covers: the cgroup fd array (used with bpf_skb_under_cgroup from tc) and
 * the two attach-time cgroup local storages (bpf_get_local_storage from
 * cgroup_skb/ingress).  Cgroup storages must have max_entries 0 (one value
 * per attached cgroup); their key is either struct bpf_cgroup_storage_key
 * (16 bytes: __u64 cgroup inode id + __u32 attach type + 4 bytes tail
 * padding) or a bare __u64 cgroup id.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   cgroups         4 / 4      3  0   cgroup_array
 *   cg_counters    16 / 100    0  0   cgroup_storage, struct key
 *   cg_pcpu_stats   8 / 13     0  0   percpu_cgroup_storage, u64 key
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct cg_counters_val {
	__u32 packets;
	__u32 bytes;
	__u8 tag[92];
};

struct cg_stats13 {
	__u32 drops;
	__u64 last_ns;
	__u8 flags;
} __attribute__((packed));

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 3);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_STORAGE);
	__type(key, struct bpf_cgroup_storage_key);
	__type(value, struct cg_counters_val);
} cg_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE);
	__type(key, __u64);
	__type(value, struct cg_stats13);
} cg_pcpu_stats SEC(".maps");

SEC("cgroup_skb/ingress")
int cgroup_maps_ingress(struct __sk_buff *skb)
{
	struct cg_counters_val *c;
	struct cg_stats13 *s;

	c = bpf_get_local_storage(&cg_counters, 0);
	__sync_fetch_and_add(&c->packets, 1);
	__sync_fetch_and_add(&c->bytes, skb->len);
	s = bpf_get_local_storage(&cg_pcpu_stats, 0);
	s->last_ns = bpf_ktime_get_ns();
	return 1;
}

SEC("tc")
int cgroup_maps_tc(struct __sk_buff *skb)
{
	return bpf_skb_under_cgroup(skb, &cgroups, 1) == 1 ? 2 : 0;
}

char LICENSE[] SEC("license") = "GPL";
