// SPDX-License-Identifier: GPL-2.0
/*
 * xdp_redirect_maps.c - DEVMAP, DEVMAP_HASH, CPUMAP and XSKMAP.
 *
 * Covers: the XDP redirect targets used with bpf_redirect_map().  Values
 * are either a bare ifindex / queue size (4 bytes) or the extended
 * struct bpf_devmap_val / struct bpf_cpumap_val (8 bytes).  libbpf never
 * passes BTF ids for these map types.  cpumap max_entries must not
 * exceed the kernel's NR_CPUS.  The kernel itself adds BPF_F_RDONLY_PROG to
 * devmap and devmap_hash (programs may only redirect through them), so
 * their map_flags read back as 0x80.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   tx_ports       4 / 8     64  0            devmap, struct bpf_devmap_val
 *   tx_ports_hash  4 / 4    129  0            devmap_hash, ifindex
 *   cpu_targets    4 / 8      7  0            cpumap, struct bpf_cpumap_val
 *   xsks           4 / 4     16  0            xskmap
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 129);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 7);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpu_targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 16);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} xsks SEC(".maps");

SEC("xdp")
int xdp_redirect_all(struct xdp_md *ctx)
{
	__u32 q = ctx->rx_queue_index;

	switch (q & 3) {
	case 0:
		return bpf_redirect_map(&tx_ports, q, 0);
	case 1:
		return bpf_redirect_map(&tx_ports_hash, ctx->ingress_ifindex, XDP_PASS);
	case 2:
		return bpf_redirect_map(&cpu_targets, q % 7, 0);
	default:
		return bpf_redirect_map(&xsks, q, XDP_PASS);
	}
}

char LICENSE[] SEC("license") = "GPL";
