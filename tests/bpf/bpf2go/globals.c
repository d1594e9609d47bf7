// SPDX-License-Identifier: GPL-2.0
/*
 * globals.c - global data the way Go agents use it (bpf2go generates variables for them).
 *
 * Covers: data maps named after their section by cilium/ebpf (".data", ".rodata", ".bss",
 * ".data.config", ".rodata.limits") where libbpf names them "<obj>.data" etc. cut to 15
 * characters; BPF_F_MMAPABLE on every data map (cilium/ebpf current, at collection load);
 * a .rodata.unused section with a global variable no program reads: current cilium/ebpf
 * still creates it (it has symbols), 0.9.1 drops it (no references); .data.config is no data
 * section for 0.9.1, which refuses the object (a relocation into a section it ignores).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

volatile __u64 packets = 1;                              /* .data */
volatile __u64 drops;                                    /* .bss */
const volatile __u32 mode = 3;                           /* .rodata */
volatile __u32 sample_rate SEC(".data.config") = 100;
const volatile __u16 max_burst SEC(".rodata.limits") = 64;
const volatile __u8 never_read[40] SEC(".rodata.unused") = { 1 };

SEC("xdp")
int count_packets(struct xdp_md *ctx)
{
	packets++;
	if (mode == 2 || sample_rate > max_burst)
		drops++;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
