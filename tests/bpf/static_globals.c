// SPDX-License-Identifier: GPL-2.0
/*
 * static_globals.c - only static (file-local) globals in .data and .bss.
 *
 * Covers: internal maps whose BTF DATASEC contains only static VARs.
 * libbpf still creates "static_g.data" and "static_g.bss" (value 16 bytes
 * each) but does NOT add BPF_F_MMAPABLE, because no
 * variable would be exposed through a skeleton.  The program mutates the
 * statics so clang cannot fold them into constants.
 *
 * Variables: .data  s_seed (u32), s_mask (u64)   (static)
 *            .bss   s_total (u64), s_last (u32)  (static)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static __u32 s_seed = 17;
static __u64 s_mask = 0xffff;
static __u64 s_total;
static __u32 s_last;

SEC("socket")
int static_globals_sock(struct __sk_buff *skb)
{
	if (s_last == skb->len)
		return 1;
	s_total += skb->len;
	s_last = skb->len ^ s_seed;
	s_seed = s_seed * 31 + 7;
	if (s_total > s_mask)
		s_mask <<= 1;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
