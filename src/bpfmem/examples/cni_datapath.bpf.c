// SPDX-License-Identifier: GPL-2.0
/*
 * cni_datapath.bpf.c - a small CNI-like datapath, bundled as an example
 * input for bpfmem.
 *
 * Written for bpfmem; it imitates the map layout of a container-network
 * agent rather than any real project.  An XDP program filters traffic
 * towards local endpoints; a tc program does service lookup, policy,
 * conntrack and reverse-NAT bookkeeping.  Packet rewriting is reduced to
 * the IPv4 destination address so the example stays short.
 *
 * Maps (key/value sizes in bytes, max_entries; metrics_map is per-CPU):
 *   service_route_table         hash          20/32   65536  userspace-written
 *   service_access_table        hash           8/8   131072  userspace-written
 *   service_deny_table          hash           8/4    65536  userspace-written
 *   service_remote_grant_table  hash          12/16   65536  userspace-written
 *   attachment_identity_table   hash          20/24   65536  userspace-written
 *   service_reverse_table       lru_hash      20/20  131072  datapath-updated
 *   conntrack_table             hash          40/40  131072  datapath-updated
 *   metrics_map                 percpu_array   4/16    1024  lookup + increment
 *   events                      ringbuf        1 MiB of ring  bpf_ringbuf_output
 *   cni_data.rodata             .rodata config (const volatile)
 * What they cost depends on the kernel and its CPUs: `bpfmem maps` on this
 * object says it (68.6Mi charged at create on Linux 6.18 with 2 CPUs).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define FAMILY_V4 4
#define FAMILY_V6 6

#define DIR_INGRESS 0
#define DIR_EGRESS 1

enum metric_idx {
	M_XDP_PASS,
	M_XDP_DROP_DENY,
	M_TC_PASS,
	M_TC_DROP_POLICY,
	M_TC_SERVICE_DNAT,
	M_CT_NEW,
	M_CT_HIT,
	M_PARSE_ERROR,
	M_MAX = 1024,
};

enum event_kind {
	EV_DENY = 1,
	EV_POLICY_DROP,
	EV_CT_NEW,
};

/* ---- keys and values ------------------------------------------------ */

struct svc_key {		/* 20 bytes */
	__u8 addr[16];		/* IPv4 uses the first 4 bytes */
	__be16 port;
	__u8 proto;
	__u8 family;
};

struct svc_route {		/* 32 bytes */
	__u8 backend_addr[16];
	__be16 backend_port;
	__u16 rev_nat_id;
	__u32 backend_slot;
	__u32 flags;
	__u32 reserved;
};

struct access_key {		/* 8 bytes */
	__u32 identity;
	__be16 port;
	__u8 proto;
	__u8 dir;
};

struct access_val {		/* 8 bytes */
	__u32 rule_id;
	__u16 proxy_port;
	__u8 action;
	__u8 auth_required;
};

struct grant_key {		/* 12 bytes */
	__u32 remote_identity;
	__u32 local_identity;
	__be16 port;
	__u8 proto;
	__u8 pad;
};

struct grant_val {		/* 16 bytes */
	__u64 expires_ns;
	__u32 grant_id;
	__u32 flags;
};

struct endpoint_key {		/* 20 bytes */
	__u8 addr[16];
	__u8 family;
	__u8 pad[3];
};

struct endpoint_info {		/* 24 bytes */
	__u32 identity;
	__u32 ifindex;
	__u8 mac[6];
	__u8 node_mac[6];
	__u16 flags;
	__u16 pad;
};

struct rev_key {		/* 20 bytes */
	__u8 client_addr[16];
	__be16 client_port;
	__u8 proto;
	__u8 family;
};

struct rev_val {		/* 20 bytes */
	__u8 svc_addr[16];
	__be16 svc_port;
	__u16 rev_nat_id;
};

struct ct_key {			/* 40 bytes */
	__u8 saddr[16];
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;
	__u16 pad;
};

struct ct_entry {		/* 40 bytes */
	__u64 created_ns;
	__u64 last_seen_ns;
	__u64 packets;
	__u64 bytes;
	__u32 rev_nat_id;
	__u16 tx_flags;
	__u16 rx_flags;
};

struct metrics_val {		/* 16 bytes */
	__u64 packets;
	__u64 bytes;
};

struct event {
	__u64 ts_ns;
	__u32 kind;
	__u32 identity;
	__u8 saddr[16];
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;
	__u16 pad;
};

/* ---- maps ----------------------------------------------------------- */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct svc_key);
	__type(value, struct svc_route);
} service_route_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 131072);
	__type(key, struct access_key);
	__type(value, struct access_val);
} service_access_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct access_key);
	__type(value, __u32);	/* deny rule id */
} service_deny_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct grant_key);
	__type(value, struct grant_val);
} service_remote_grant_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct endpoint_key);
	__type(value, struct endpoint_info);
} attachment_identity_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 131072);
	__type(key, struct rev_key);
	__type(value, struct rev_val);
} service_reverse_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 131072);
	__type(key, struct ct_key);
	__type(value, struct ct_entry);
} conntrack_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, M_MAX);
	__type(key, __u32);
	__type(value, struct metrics_val);
} metrics_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* ---- configuration (.rodata, set by the agent before load) ----------- */

const volatile __u32 cfg_node_id = 1;
const volatile __u8 cfg_enable_ipv6 = 1;
const volatile __u8 cfg_enforce_policy = 1;
const volatile __u8 cfg_emit_ct_events = 1;
const volatile __u64 cfg_ct_timeout_ns = 60ULL * 1000000000ULL;

/* ---- helpers -------------------------------------------------------- */

struct flow {
	__u8 saddr[16];
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;
	__u32 len;
};

/* metrics: lookup + increment, kept out of line as a .text subprogram */
static __noinline int account(__u32 idx, __u32 bytes)
{
	struct metrics_val *m;

	m = bpf_map_lookup_elem(&metrics_map, &idx);
	if (!m)
		return 0;
	m->packets++;
	m->bytes += bytes;
	return 0;
}

static __always_inline int parse_flow(void *data, void *data_end, struct flow *f)
{
	struct ethhdr *eth = data;
	__be16 *ports;
	void *l4;

	if ((void *)(eth + 1) > data_end)
		return -1;
	f->len = data_end - data;

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > data_end || ip->ihl != 5)
			return -1;
		__builtin_memcpy(f->saddr, &ip->saddr, 4);
		__builtin_memcpy(f->daddr, &ip->daddr, 4);
		f->proto = ip->protocol;
		f->family = FAMILY_V4;
		l4 = ip + 1;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6) && cfg_enable_ipv6) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end)
			return -1;
		__builtin_memcpy(f->saddr, &ip6->saddr, 16);
		__builtin_memcpy(f->daddr, &ip6->daddr, 16);
		f->proto = ip6->nexthdr;
		f->family = FAMILY_V6;
		l4 = ip6 + 1;
	} else {
		return -1;
	}

	if (f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP) {
		ports = l4;
		if ((void *)(ports + 2) > data_end)
			return -1;
		f->sport = ports[0];
		f->dport = ports[1];
	}
	return 0;
}

static __always_inline void emit(__u32 kind, __u32 identity, const struct flow *f)
{
	struct event ev = {};

	ev.ts_ns = bpf_ktime_get_ns();
	ev.kind = kind;
	ev.identity = identity;
	__builtin_memcpy(ev.saddr, f->saddr, 16);
	__builtin_memcpy(ev.daddr, f->daddr, 16);
	ev.sport = f->sport;
	ev.dport = f->dport;
	ev.proto = f->proto;
	ev.family = f->family;
	bpf_ringbuf_output(&events, &ev, sizeof(ev), 0);
}

static __always_inline __u32 identity_of(const __u8 *addr, __u8 family)
{
	struct endpoint_key ek = {};
	struct endpoint_info *ep;

	__builtin_memcpy(ek.addr, addr, 16);
	ek.family = family;
	ep = bpf_map_lookup_elem(&attachment_identity_table, &ek);
	return ep ? ep->identity : 0;
}

static __always_inline int denied(__u32 identity, const struct flow *f, __u8 dir)
{
	struct access_key ak = {};

	ak.identity = identity;
	ak.port = f->dport;
	ak.proto = f->proto;
	ak.dir = dir;
	return bpf_map_lookup_elem(&service_deny_table, &ak) != NULL;
}

/* ---- XDP: drop denied traffic towards local endpoints ----------------- */

SEC("xdp")
int cni_xdp_ingress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct flow f = {};
	__u32 local_id;

	if (parse_flow(data, data_end, &f) < 0) {
		account(M_PARSE_ERROR, 0);
		return XDP_PASS;
	}

	local_id = identity_of(f.daddr, f.family);
	if (local_id && cfg_enforce_policy && denied(local_id, &f, DIR_INGRESS)) {
		account(M_XDP_DROP_DENY, f.len);
		emit(EV_DENY, local_id, &f);
		return XDP_DROP;
	}
	account(M_XDP_PASS, f.len);
	return XDP_PASS;
}

/* ---- tc: service DNAT, policy, conntrack ------------------------------ */

static __always_inline int policy_allows(__u32 local_id, __u32 remote_id,
					 const struct flow *f)
{
	struct access_key ak = {};
	struct grant_key gk = {};
	struct access_val *av;
	struct grant_val *gv;

	if (!cfg_enforce_policy)
		return 1;
	if (denied(local_id, f, DIR_EGRESS))
		return 0;

	ak.identity = local_id;
	ak.port = f->dport;
	ak.proto = f->proto;
	ak.dir = DIR_EGRESS;
	av = bpf_map_lookup_elem(&service_access_table, &ak);
	if (!av)
		return 0;
	if (!av->auth_required)
		return 1;

	gk.remote_identity = remote_id;
	gk.local_identity = local_id;
	gk.port = f->dport;
	gk.proto = f->proto;
	gv = bpf_map_lookup_elem(&service_remote_grant_table, &gk);
	return gv && gv->expires_ns > bpf_ktime_get_ns();
}

static __always_inline void track(const struct flow *f, __u16 rev_nat_id)
{
	struct ct_entry *ct, fresh = {};
	struct ct_key ck = {};
	__u64 now = bpf_ktime_get_ns();

	__builtin_memcpy(ck.saddr, f->saddr, 16);
	__builtin_memcpy(ck.daddr, f->daddr, 16);
	ck.sport = f->sport;
	ck.dport = f->dport;
	ck.proto = f->proto;
	ck.family = f->family;

	ct = bpf_map_lookup_elem(&conntrack_table, &ck);
	if (ct && now - ct->created_ns < cfg_ct_timeout_ns) {
		ct->last_seen_ns = now;
		__sync_fetch_and_add(&ct->packets, 1);
		__sync_fetch_and_add(&ct->bytes, f->len);
		account(M_CT_HIT, f->len);
		return;
	}

	fresh.created_ns = now;
	fresh.last_seen_ns = now;
	fresh.packets = 1;
	fresh.bytes = f->len;
	fresh.rev_nat_id = rev_nat_id;
	fresh.tx_flags = cfg_node_id & 0xffff;
	bpf_map_update_elem(&conntrack_table, &ck, &fresh, BPF_ANY);
	account(M_CT_NEW, f->len);
	if (cfg_emit_ct_events)
		emit(EV_CT_NEW, 0, f);
}

SEC("tc")
int cni_tc_egress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct flow f = {};
	struct svc_key sk = {};
	struct svc_route *route;
	__u32 local_id, remote_id;
	__u16 rev_nat_id = 0;
	__be32 old_daddr = 0, new_daddr = 0;

	if (parse_flow(data, data_end, &f) < 0) {
		account(M_PARSE_ERROR, 0);
		return TC_ACT_OK;
	}

	local_id = identity_of(f.saddr, f.family);
	remote_id = identity_of(f.daddr, f.family);
	if (!policy_allows(local_id, remote_id, &f)) {
		account(M_TC_DROP_POLICY, f.len);
		emit(EV_POLICY_DROP, local_id, &f);
		return TC_ACT_SHOT;
	}

	/* service lookup: remember the reverse mapping, then DNAT */
	__builtin_memcpy(sk.addr, f.daddr, 16);
	sk.port = f.dport;
	sk.proto = f.proto;
	sk.family = f.family;
	route = bpf_map_lookup_elem(&service_route_table, &sk);
	if (route) {
		struct rev_key rk = {};
		struct rev_val rv = {};

		__builtin_memcpy(rk.client_addr, f.saddr, 16);
		rk.client_port = f.sport;
		rk.proto = f.proto;
		rk.family = f.family;
		__builtin_memcpy(rv.svc_addr, f.daddr, 16);
		rv.svc_port = f.dport;
		rv.rev_nat_id = route->rev_nat_id;
		bpf_map_update_elem(&service_reverse_table, &rk, &rv, BPF_ANY);

		rev_nat_id = route->rev_nat_id;
		__builtin_memcpy(&old_daddr, f.daddr, 4);
		__builtin_memcpy(&new_daddr, route->backend_addr, 4);
		__builtin_memcpy(f.daddr, route->backend_addr, 16);
		f.dport = route->backend_port;
		account(M_TC_SERVICE_DNAT, f.len);
	}

	track(&f, rev_nat_id);
	account(M_TC_PASS, f.len);

	if (rev_nat_id && f.family == FAMILY_V4) {
		__u32 off = ETH_HLEN + __builtin_offsetof(struct iphdr, daddr);

		bpf_l3_csum_replace(skb, ETH_HLEN + __builtin_offsetof(struct iphdr, check),
				    old_daddr, new_daddr, sizeof(new_daddr));
		bpf_skb_store_bytes(skb, off, &new_daddr, sizeof(new_daddr), 0);
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
