// SPDX-License-Identifier: GPL-2.0
/*
 * hash_basic.c - BPF_MAP_TYPE_HASH in BTF-defined form with awkward shapes.
 *
 * Covers: __uint(type) / __uint(max_entries) / __type(key) / __type(value)
 * with packed key/value structs whose sizes are not multiples of 8
 * (3, 7, 13, 100 bytes), a preallocated hash and one with
 * BPF_F_NO_PREALLOC.  One XDP program looks up and updates every map so
 * the object carries map relocations.
 *
 * build.py also compiles this file for -target bpfeb (hash_basic.bpfeb.o)
 * so the reader is exercised on a big-endian ELF/BTF.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   hash_k3_v13      3 / 13    1000  0
 *   hash_k7_v100     7 / 100   4096  BPF_F_NO_PREALLOC
 *   hash_k13_v7     13 / 7       17  0
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct key3 {
	__u8 b[3];
} __attribute__((packed));

struct key7 {
	__u16 port;
	__u8 proto;
	__u32 addr;
} __attribute__((packed));

struct key13 {
	__u32 a;
	__u64 b;
	__u8 c;
} __attribute__((packed));

struct val7 {
	__u8 b[7];
};

struct val13 {
	__u64 packets;
	__u32 bytes;
	__u8 state;
} __attribute__((packed));

struct val100 {
	__u8 blob[100];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1000);
	__type(key, struct key3);
	__type(value, struct val13);
} hash_k3_v13 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct key7);
	__type(value, struct val100);
} hash_k7_v100 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 17);
	__type(key, struct key13);
	__type(value, struct val7);
} hash_k13_v7 SEC(".maps");

SEC("xdp")
int hash_basic_xdp(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	struct key3 k3 = {};
	struct key7 k7 = {};
	struct key13 k13 = {};
	struct val13 *v13;
	struct val7 v7 = {};

	/* runtime values only: constant initialisers would add a .rodata map */
	k3.b[0] = ifindex;
	k7.addr = ifindex;
	k7.proto = 6;
	k13.a = ifindex;
	k13.c = ctx->rx_queue_index;

	v13 = bpf_map_lookup_elem(&hash_k3_v13, &k3);
	if (v13)
		v13->packets++;
	if (!bpf_map_lookup_elem(&hash_k7_v100, &k7))
		return XDP_DROP;
	bpf_map_update_elem(&hash_k13_v7, &k13, &v7, BPF_ANY);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
