// SPDX-License-Identifier: GPL-2.0
/*
 * cni_seed.h - the CNI-like datapath shared by the three seed releases
 * (cni_v054.bpf.c, cni_v060_before.bpf.c, cni_v060_after.bpf.c).  Written
 * for bpfmem's examples; not taken from any project.  Each release file
 * describes its maps, sets the knobs below and includes this header.
 *
 *   WITH_SERVICE_MAPS   0: v0.5.4 (conntrack, metrics, interfaces, events);
 *                       1: v0.6.0, which adds the six pinned service route
 *                       maps, policy lookups and service DNAT.
 *   SERVICE_MAP_FLAGS   if defined, the map_flags of the five service tables
 *                       that only userspace writes (v0.6.0 after the fix:
 *                       BPF_F_NO_PREALLOC).  Left undefined, those maps carry
 *                       no map_flags at all (v0.6.0 before the fix).
 */
#ifndef CNI_SEED_H
#define CNI_SEED_H

#ifndef WITH_SERVICE_MAPS
#define WITH_SERVICE_MAPS 0
#endif

#ifdef SERVICE_MAP_FLAGS
#define SERVICE_MAP_FLAGS_ATTR __uint(map_flags, SERVICE_MAP_FLAGS);
#else
#define SERVICE_MAP_FLAGS_ATTR
#endif

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

#if WITH_SERVICE_MAPS
#define DIR_INGRESS 0
#define DIR_EGRESS 1
#endif

#define METRIC_SLOTS 64		/* per-reason counters for 64 interface slots */

enum reason {
	R_XDP_PASS,
	R_TC_PASS,
	R_CT_NEW,
	R_CT_HIT,
	R_PARSE_ERROR,
#if WITH_SERVICE_MAPS
	R_XDP_DROP_DENY,	/* new in v0.6.0 */
	R_TC_DROP_POLICY,	/* new in v0.6.0 */
	R_TC_SERVICE_DNAT,	/* new in v0.6.0 */
#endif
	R_MAX = 64,
};

enum event_kind {
	EV_CT_NEW = 1,
#if WITH_SERVICE_MAPS
	EV_DENY,		/* new in v0.6.0 */
	EV_POLICY_DROP,		/* new in v0.6.0 */
#endif
};

/* ---- keys and values ------------------------------------------------ */

struct flow {			/* 5-tuple, also the conntrack key: 40 bytes */
	__u8 saddr[16];		/* IPv4 uses the first 4 bytes */
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;
	__u16 pad;
};

struct ct_entry {		/* 64 bytes */
	__u64 created_ns;
	__u64 last_seen_ns;
	__u64 tx_packets;
	__u64 tx_bytes;
	__u64 rx_packets;
	__u64 rx_bytes;
	__u32 rev_nat_id;
	__u32 identity;
	__u16 tx_flags;
	__u16 rx_flags;
	__u32 reserved;
};

struct iface_cfg {		/* 64 bytes, indexed by ifindex */
	__u8 mac[6];
	__u16 flags;
	__u32 metric_slot;
	__u32 mtu;
	__u32 node_id;
	__u8 addr4[4];
	__u8 addr6[16];
	__u8 reserved[24];
};

struct metrics_val {		/* 32 bytes */
	__u64 packets;
	__u64 bytes;
	__u64 drops;
	__u64 errors;
};

#if WITH_SERVICE_MAPS
struct svc_key {		/* 20 bytes */
	__u8 addr[16];
	__be16 port;
	__u8 proto;
	__u8 family;
};

struct svc_route {		/* 72 bytes */
	__u8 backend_addr[16];
	__u8 source_addr[16];	/* SNAT address for the remote grant path */
	__be16 backend_port;
	__u16 rev_nat_id;
	__u32 backend_slot;
	__u32 backend_count;
	__u32 flags;
	__u64 route_id;
	__u64 generation;
	__u64 reserved;
};

struct access_key {		/* 8 bytes */
	__u32 identity;
	__be16 port;
	__u8 proto;
	__u8 dir;
};

struct access_val {		/* 24 bytes */
	__u64 rule_id;
	__u64 generation;
	__u16 proxy_port;
	__u8 action;
	__u8 auth_required;
	__u32 flags;
};

struct deny_val {		/* 16 bytes */
	__u64 rule_id;
	__u64 generation;
};

struct grant_key {		/* 16 bytes */
	__u32 remote_identity;
	__u32 local_identity;
	__be16 port;
	__u8 proto;
	__u8 pad;
	__u32 remote_node;
};

struct grant_val {		/* 48 bytes */
	__u64 expires_ns;
	__u64 grant_id;
	__u64 generation;
	__u8 remote_node_addr[16];
	__u32 flags;
	__u32 reserved;
};

struct endpoint_key {		/* 20 bytes */
	__u8 addr[16];
	__u8 family;
	__u8 pad[3];
};

struct endpoint_info {		/* 72 bytes */
	__u32 identity;
	__u32 ifindex;
	__u8 mac[6];
	__u8 node_mac[6];
	__u16 flags;
	__u16 metric_slot;
	__u8 node_addr[16];
	__u64 pod_id;
	__u64 namespace_id;
	__u64 generation;
	__u64 reserved;
};

struct rev_val {		/* 56 bytes */
	__u8 svc_addr[16];
	__u8 backend_addr[16];
	__be16 svc_port;
	__u16 rev_nat_id;
	__u32 flags;
	__u64 created_ns;
	__u64 last_seen_ns;
};
#endif /* WITH_SERVICE_MAPS */

struct event {
	__u64 ts_ns;
	__u32 kind;
	__u32 identity;
	struct flow flow;
};

/* ---- maps since v0.5.4 (created by the agent, not pinned) ----------- */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow);
	__type(value, struct ct_entry);
} conntrack_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, R_MAX * METRIC_SLOTS);
	__type(key, __u32);
	__type(value, struct metrics_val);
} metrics_map SEC(".maps");

/* Per-interface configuration, written by the agent, indexed by ifindex. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct iface_cfg);
} interface_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

#if WITH_SERVICE_MAPS
/* ---- service route maps, new in v0.6.0 (pinned, shared with the router) */

/*
 * Written by userspace only; the datapath only looks rows up.  Their map_flags
 * come from SERVICE_MAP_FLAGS (see the top of this file).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct svc_key);
	__type(value, struct svc_route);
	SERVICE_MAP_FLAGS_ATTR
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} service_route_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct access_key);
	__type(value, struct access_val);
	SERVICE_MAP_FLAGS_ATTR
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} service_access_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct access_key);
	__type(value, struct deny_val);
	SERVICE_MAP_FLAGS_ATTR
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} service_deny_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct grant_key);
	__type(value, struct grant_val);
	SERVICE_MAP_FLAGS_ATTR
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} service_remote_grant_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct endpoint_key);
	__type(value, struct endpoint_info);
	SERVICE_MAP_FLAGS_ATTR
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} attachment_identity_table SEC(".maps");

/* Written by the datapath on every new service connection. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 131072);
	__type(key, struct flow);
	__type(value, struct rev_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} service_reverse_table SEC(".maps");
#endif /* WITH_SERVICE_MAPS */

/* ---- configuration (.rodata, set by the agent before load) ----------- */

const volatile __u32 cfg_node_id = 1;
const volatile __u8 cfg_enable_ipv6 = 1;
#if WITH_SERVICE_MAPS
const volatile __u8 cfg_enforce_policy = 1;
#endif
const volatile __u8 cfg_emit_ct_events = 1;
const volatile __u64 cfg_ct_timeout_ns = 60ULL * 1000000000ULL;

/* ---- helpers -------------------------------------------------------- */

static __noinline int account(__u32 reason, __u32 slot, __u32 bytes)
{
	__u32 idx = (reason % R_MAX) * METRIC_SLOTS + slot % METRIC_SLOTS;
	struct metrics_val *m;

	m = bpf_map_lookup_elem(&metrics_map, &idx);
	if (!m)
		return 0;
	m->packets++;
	m->bytes += bytes;
#if WITH_SERVICE_MAPS
	if (reason == R_XDP_DROP_DENY || reason == R_TC_DROP_POLICY)
		m->drops++;
#endif
	if (reason == R_PARSE_ERROR)
		m->errors++;
	return 0;
}

static __always_inline int parse_flow(void *data, void *data_end, struct flow *f,
				      __u32 *len)
{
	struct ethhdr *eth = data;
	__be16 *ports;
	void *l4;

	if ((void *)(eth + 1) > data_end)
		return -1;
	*len = data_end - data;

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

static __noinline int emit(__u32 kind, __u32 identity, const struct flow *f)
{
	struct event *ev;

	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev)
		return 0;
	ev->ts_ns = bpf_ktime_get_ns();
	ev->kind = kind;
	ev->identity = identity;
	__builtin_memcpy(&ev->flow, f, sizeof(*f));
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* Metrics slot of an interface the agent manages; 0 for the others. */
static __always_inline __u32 iface_slot(__u32 ifindex)
{
	struct iface_cfg *ifc;

	ifc = bpf_map_lookup_elem(&interface_table, &ifindex);
	return ifc ? ifc->metric_slot : 0;
}

#if WITH_SERVICE_MAPS
/* Identity and metrics slot of a local or remote address (lookup only). */
static __always_inline __u32 identity_of(const __u8 *addr, __u8 family, __u32 *slot)
{
	struct endpoint_key ek = {};
	struct endpoint_info *ep;

	__builtin_memcpy(ek.addr, addr, 16);
	ek.family = family;
	ep = bpf_map_lookup_elem(&attachment_identity_table, &ek);
	if (!ep)
		return 0;
	if (slot)
		*slot = ep->metric_slot;
	return ep->identity;
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
#endif /* WITH_SERVICE_MAPS */

/* Conntrack: refresh an entry or create one (the datapath writes this map). */
static __noinline int track(const struct flow *f, __u32 len, __u32 identity,
			    __u32 rev_nat_id, __u32 slot)
{
	struct ct_entry *ct, fresh = {};
	__u64 now = bpf_ktime_get_ns();

	ct = bpf_map_lookup_elem(&conntrack_table, f);
	if (ct && now - ct->created_ns < cfg_ct_timeout_ns) {
		ct->last_seen_ns = now;
		__sync_fetch_and_add(&ct->tx_packets, 1);
		__sync_fetch_and_add(&ct->tx_bytes, len);
		account(R_CT_HIT, slot, len);
		return 0;
	}

	fresh.created_ns = now;
	fresh.last_seen_ns = now;
	fresh.tx_packets = 1;
	fresh.tx_bytes = len;
	fresh.rev_nat_id = rev_nat_id;
	fresh.identity = identity;
	fresh.tx_flags = cfg_node_id & 0xffff;
	bpf_map_update_elem(&conntrack_table, f, &fresh, BPF_ANY);
	account(R_CT_NEW, slot, len);
	if (cfg_emit_ct_events)
		emit(EV_CT_NEW, identity, f);
	return 0;
}

#if WITH_SERVICE_MAPS
/* ---- XDP: drop denied traffic towards local endpoints ----------------- */
#else
/* ---- XDP: count reply traffic on tracked connections ----------------- */
#endif

SEC("xdp")
int cni_xdp_ingress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct flow f = {};
#if WITH_SERVICE_MAPS
	__u32 len = 0, slot = 0, local_id;
#else
	__u32 len = 0, slot;
#endif
	struct ct_entry *ct;

	slot = iface_slot(ctx->ingress_ifindex);
	if (parse_flow(data, data_end, &f, &len) < 0) {
		account(R_PARSE_ERROR, slot, 0);
		return XDP_PASS;
	}

#if WITH_SERVICE_MAPS
	local_id = identity_of(f.daddr, f.family, &slot);
	if (local_id && cfg_enforce_policy && denied(local_id, &f, DIR_INGRESS)) {
		account(R_XDP_DROP_DENY, slot, len);
		emit(EV_DENY, local_id, &f);
		return XDP_DROP;
	}

	/* reply traffic of a tracked connection: count it on the entry */
#endif
	ct = bpf_map_lookup_elem(&conntrack_table, &f);
	if (ct) {
		ct->last_seen_ns = bpf_ktime_get_ns();
		__sync_fetch_and_add(&ct->rx_packets, 1);
		__sync_fetch_and_add(&ct->rx_bytes, len);
	}
	account(R_XDP_PASS, slot, len);
	return XDP_PASS;
}

#if WITH_SERVICE_MAPS
/* ---- tc: policy, service DNAT, reverse NAT, conntrack ----------------- */

static __noinline int policy_allows(__u32 local_id, __u32 remote_id, const struct flow *f)
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

/* Remember how to undo the DNAT for the reply (the datapath writes this map). */
static __noinline int remember_reverse(const struct flow *f, const struct svc_route *route)
{
	struct rev_val rv = {};
	__u64 now = bpf_ktime_get_ns();

	__builtin_memcpy(rv.svc_addr, f->daddr, 16);
	__builtin_memcpy(rv.backend_addr, route->backend_addr, 16);
	rv.svc_port = f->dport;
	rv.rev_nat_id = route->rev_nat_id;
	rv.flags = route->flags;
	rv.created_ns = now;
	rv.last_seen_ns = now;
	return bpf_map_update_elem(&service_reverse_table, f, &rv, BPF_ANY);
}
#else
/* ---- tc: conntrack ---------------------------------------------------- */
#endif

SEC("tc")
int cni_tc_egress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct flow f = {};
#if WITH_SERVICE_MAPS
	struct svc_key sk = {};
	struct svc_route *route;
	__u32 len = 0, slot = 0, local_id, remote_id, rev_nat_id = 0;
	__be32 old_daddr = 0, new_daddr = 0;
#else
	__u32 len = 0, slot;
#endif

	slot = iface_slot(skb->ifindex);
	if (parse_flow(data, data_end, &f, &len) < 0) {
		account(R_PARSE_ERROR, slot, 0);
		return TC_ACT_OK;
	}

#if WITH_SERVICE_MAPS
	local_id = identity_of(f.saddr, f.family, &slot);
	remote_id = identity_of(f.daddr, f.family, NULL);
	if (!policy_allows(local_id, remote_id, &f)) {
		account(R_TC_DROP_POLICY, slot, len);
		emit(EV_POLICY_DROP, local_id, &f);
		return TC_ACT_SHOT;
	}

	__builtin_memcpy(sk.addr, f.daddr, 16);
	sk.port = f.dport;
	sk.proto = f.proto;
	sk.family = f.family;
	route = bpf_map_lookup_elem(&service_route_table, &sk);
	if (route) {
		remember_reverse(&f, route);
		rev_nat_id = route->rev_nat_id;
		__builtin_memcpy(&old_daddr, f.daddr, 4);
		__builtin_memcpy(&new_daddr, route->backend_addr, 4);
		__builtin_memcpy(f.daddr, route->backend_addr, 16);
		f.dport = route->backend_port;
		account(R_TC_SERVICE_DNAT, slot, len);
	}

	track(&f, len, local_id, rev_nat_id, slot);
#else
	track(&f, len, 0, 0, slot);
#endif
	account(R_TC_PASS, slot, len);

#if WITH_SERVICE_MAPS
	if (rev_nat_id && f.family == FAMILY_V4) {
		bpf_l3_csum_replace(skb, ETH_HLEN + __builtin_offsetof(struct iphdr, check),
				    old_daddr, new_daddr, sizeof(new_daddr));
		bpf_skb_store_bytes(skb, ETH_HLEN + __builtin_offsetof(struct iphdr, daddr),
				    &new_daddr, sizeof(new_daddr), 0);
	}
#endif
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";

#endif /* CNI_SEED_H */
