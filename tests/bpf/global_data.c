// SPDX-License-Identifier: GPL-2.0
/*
 * global_data.c - global variables in .data, .bss and .rodata.
 *
 * Covers: libbpf "internal" maps.  Each non-empty section becomes a
 * one-element BPF_MAP_TYPE_ARRAY (key_size 4, max_entries 1,
 * value_size = section size) named <object-name prefix> + section name:
 * libbpf 1.1 reserves max(7, len(section)) chars for the section name and
 * fills the rest of the 15 with the object name, so this file gives
 * "global_d.data", "global_d.bss", "global_d.rodata".  .rodata (const volatile config) gets
 * BPF_F_RDONLY_PROG and is frozen after load; sections that contain at
 * least one non-static variable also get BPF_F_MMAPABLE.  The program reads
 * and writes the variables, producing relocations into all three sections.
 *
 * Variables: .data   counter (u32), tag[7] (char), ratio (u64)   -> 24 bytes
 *            .bss    hits (u64), last13[13] (u8)                  -> 21 bytes
 *            .rodata cfg_port (u16), cfg_mode[3] (u8), cfg_limit (u64)
 *                                                                 -> 16 bytes
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* .data */
__u32 counter = 5;
char tag[7] = "bpfmem";
__u64 ratio = 3;

/* .bss */
__u64 hits;
__u8 last13[13];

/* .rodata: set by the loader before load, constant for the verifier */
const volatile __u16 cfg_port = 8080;
const volatile __u8 cfg_mode[3] = { 1, 2, 3 };
const volatile __u64 cfg_limit = 1000000;

SEC("xdp")
int global_data_xdp(struct xdp_md *ctx)
{
	hits++;
	last13[ctx->rx_queue_index & 7] = tag[0];
	if (counter * ratio > cfg_limit)
		return XDP_DROP;
	counter++;
	if (cfg_mode[1] == 2 && ctx->ingress_ifindex == cfg_port)
		return XDP_TX;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
