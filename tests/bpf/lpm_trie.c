// SPDX-License-Identifier: GPL-2.0
/*
 * lpm_trie.c - BPF_MAP_TYPE_LPM_TRIE.
 *
 * Covers: longest-prefix-match tries keyed by {__u32 prefixlen; data[]}.
 * The kernel requires BPF_F_NO_PREALLOC for LPM tries (nodes are
 * allocated on update), so max_entries is only an upper bound.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   lpm_v4     8 / 7     10000  NO_PREALLOC            IPv4 prefix
 *   lpm_v6    20 / 100    1024  NO_PREALLOC|RDONLY_PROG IPv6 prefix
 *   lpm_k7     7 / 3        77  NO_PREALLOC            3 data bytes
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct lpm_key_v4 {
	__u32 prefixlen;
	__u8 addr[4];
};

struct lpm_key_v6 {
	__u32 prefixlen;
	__u8 addr[16];
};

struct lpm_key_7 {
	__u32 prefixlen;
	__u8 data[3];
} __attribute__((packed));

struct route_val7 {
	__u8 b[7];
};

struct policy_val100 {
	__u32 id;
	__u8 rest[96];
};

struct val3 {
	__u8 b[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 10000);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key_v4);
	__type(value, struct route_val7);
} lpm_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_RDONLY_PROG);
	__type(key, struct lpm_key_v6);
	__type(value, struct policy_val100);
} lpm_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 77);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key_7);
	__type(value, struct val3);
} lpm_k7 SEC(".maps");

SEC("xdp")
int lpm_trie_xdp(struct xdp_md *ctx)
{
	struct lpm_key_v4 k4 = {};
	struct lpm_key_v6 k6 = {};
	struct lpm_key_7 k7 = {};
	struct policy_val100 *pol;
	struct val3 *v3;

	/* assigned at run time so clang does not emit a .rodata template */
	k4.prefixlen = 32;
	k6.prefixlen = 128;
	k7.prefixlen = 24;
	*(__u32 *)k4.addr = ctx->rx_queue_index;
	k6.addr[15] = ctx->ingress_ifindex;
	k7.data[0] = ctx->ingress_ifindex;
	if (!bpf_map_lookup_elem(&lpm_v4, &k4))
		return XDP_DROP;
	pol = bpf_map_lookup_elem(&lpm_v6, &k6);
	if (pol && pol->id == 0)
		return XDP_DROP;
	v3 = bpf_map_lookup_elem(&lpm_k7, &k7);
	if (v3)
		v3->b[0]++;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
