// SPDX-License-Identifier: GPL-2.0
/*
 * bloom_filter.c - BPF_MAP_TYPE_BLOOM_FILTER.
 *
 * Covers: keyless bloom filters (key_size 0) with __uint(map_extra, N)
 * giving the number of hash functions (low 4 bits; 0 means the kernel
 * default of 5), value given as a BTF type or as value_size, and
 * BPF_F_ZERO_SEED.  The kernel sizes the bit array from max_entries and
 * the number of hashes.
 *
 * Maps (key/value bytes, max_entries, flags, map_extra):
 *   bloom_v7        0 / 7     10000  0          3
 *   bloom_sz_v13    0 / 13     1000  ZERO_SEED  7
 *   bloom_default   0 / 8        64  0          (unset -> 5 hashes)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct val7 {
	__u8 b[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_BLOOM_FILTER);
	__uint(max_entries, 10000);
	__uint(map_extra, 3);
	__type(value, struct val7);
} bloom_v7 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_BLOOM_FILTER);
	__uint(max_entries, 1000);
	__uint(map_flags, BPF_F_ZERO_SEED);
	__uint(map_extra, 7);
	__uint(value_size, 13);
} bloom_sz_v13 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_BLOOM_FILTER);
	__uint(max_entries, 64);
	__type(value, __u64);
} bloom_default SEC(".maps");

SEC("raw_tp/sys_enter")
int bloom_raw_tp(void *ctx)
{
	struct val7 v7 = {};
	__u8 v13[13] = {};
	__u64 id = bpf_get_current_pid_tgid();

	v7.b[0] = id;
	v13[12] = id >> 8;
	if (bpf_map_peek_elem(&bloom_v7, &v7) == 0)
		return 0;
	bpf_map_push_elem(&bloom_v7, &v7, BPF_ANY);
	bpf_map_push_elem(&bloom_sz_v13, v13, BPF_ANY);
	bpf_map_push_elem(&bloom_default, &id, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
