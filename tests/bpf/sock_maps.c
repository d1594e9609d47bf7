// SPDX-License-Identifier: GPL-2.0
/*
 * sock_maps.c - SOCKMAP, SOCKHASH and REUSEPORT_SOCKARRAY.
 *
 * Covers: socket-holding maps and the programs that use them (sk_msg,
 * sk_skb/stream_verdict, sk_skb/stream_parser, sk_reuseport).  Values are
 * socket fds / cookies of 4 or 8 bytes.  libbpf passes no BTF ids for
 * sockmap/sockhash; reuseport_sockarray keeps them.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   sock_map        4 / 4     65  0
 *   sock_hash       7 / 8   1000  0   packed 7-byte flow key
 *   reuse_groups    4 / 8     33  0   reuseport_sockarray, u64 value
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct flow7 {
	__u32 ip;
	__u16 port;
	__u8 proto;
} __attribute__((packed));

struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 65);
	__type(key, __u32);
	__type(value, __u32);
} sock_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 1000);
	__type(key, struct flow7);
	__type(value, __u64);
} sock_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_REUSEPORT_SOCKARRAY);
	__uint(max_entries, 33);
	__type(key, __u32);
	__type(value, __u64);
} reuse_groups SEC(".maps");

SEC("sk_msg")
int sock_maps_msg(struct sk_msg_md *msg)
{
	struct flow7 k = {};

	k.ip = msg->remote_ip4;
	k.port = msg->remote_port;
	k.proto = 6;
	return bpf_msg_redirect_hash(msg, &sock_hash, &k, BPF_F_INGRESS);
}

SEC("sk_skb/stream_parser")
int sock_maps_parser(struct __sk_buff *skb)
{
	return skb->len;
}

SEC("sk_skb/stream_verdict")
int sock_maps_verdict(struct __sk_buff *skb)
{
	return bpf_sk_redirect_map(skb, &sock_map, skb->len & 63, 0);
}

SEC("sk_reuseport")
int sock_maps_reuseport(struct sk_reuseport_md *reuse)
{
	__u32 idx = reuse->hash % 33;

	if (bpf_sk_select_reuseport(reuse, &reuse_groups, &idx, 0))
		return SK_DROP;
	return SK_PASS;
}

char LICENSE[] SEC("license") = "GPL";
