// SPDX-License-Identifier: GPL-2.0
/*
 * cni_v054.bpf.c - release v0.5.4 of a CNI-like datapath, the release nodes
 * upgrade FROM.  Written for bpfmem's examples; not taken from any project.
 *
 * An XDP program counts reply traffic on conntrack entries; a tc program
 * creates and refreshes them.  No service route maps yet: v0.6.0
 * (cni_v060_before.bpf.c) adds them, and none of them is pinned on a node
 * running this release, so the upgraded agent creates (and pays for) all of
 * them at start.
 *
 *   map                          type       key/value  max_entries
 *   conntrack_table              lru_hash     40/64        65536
 *   metrics_map                  percpu_array  4/32         4096
 *   interface_table              array         4/64         4096
 *   events                       ringbuf       1 MiB
 *   cni_v054.rodata              agent configuration (const volatile)
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

#define METRIC_SLOTS 64		/* per-reason counters for 64 interface slots */

enum reason {
	R_XDP_PASS,
	R_TC_PASS,
	R_CT_NEW,
	R_CT_HIT,
	R_PARSE_ERROR,
	R_MAX = 64,
};

enum event_kind {
	EV_CT_NEW = 1,
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

struct event {
	__u64 ts_ns;
	__u32 kind;
	__u32 identity;
	struct flow flow;
};

/* ---- maps (created by the agent at start, not pinned) ---------------- */

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

/* ---- configuration (.rodata, set by the agent before load) ----------- */

const volatile __u32 cfg_node_id = 1;
const volatile __u8 cfg_enable_ipv6 = 1;
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

/* ---- XDP: count reply traffic on tracked connections ----------------- */

SEC("xdp")
int cni_xdp_ingress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct flow f = {};
	__u32 len = 0, slot;
	struct ct_entry *ct;

	slot = iface_slot(ctx->ingress_ifindex);
	if (parse_flow(data, data_end, &f, &len) < 0) {
		account(R_PARSE_ERROR, slot, 0);
		return XDP_PASS;
	}

	ct = bpf_map_lookup_elem(&conntrack_table, &f);
	if (ct) {
		ct->last_seen_ns = bpf_ktime_get_ns();
		__sync_fetch_and_add(&ct->rx_packets, 1);
		__sync_fetch_and_add(&ct->rx_bytes, len);
	}
	account(R_XDP_PASS, slot, len);
	return XDP_PASS;
}

/* ---- tc: conntrack ---------------------------------------------------- */

SEC("tc")
int cni_tc_egress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct flow f = {};
	__u32 len = 0, slot;

	slot = iface_slot(skb->ifindex);
	if (parse_flow(data, data_end, &f, &len) < 0) {
		account(R_PARSE_ERROR, slot, 0);
		return TC_ACT_OK;
	}

	track(&f, len, 0, 0, slot);
	account(R_TC_PASS, slot, len);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
