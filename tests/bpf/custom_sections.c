// SPDX-License-Identifier: GPL-2.0
/*
 * custom_sections.c - custom .data.* / .rodata.* sections via SEC().
 *
 * Covers: libbpf (>= 0.6) turns every ELF section named ".data.<x>" or
 * ".rodata.<x>" into its own internal array map.  Names with a second dot
 * are used as-is (no object-name prefix): ".data.foo", ".rodata.bar".
 * The kernel-visible name is truncated to 15 characters (".data.long_sect"
 * for ".data.long_section_name") while bpf_map__name() returns the full
 * section name.  .rodata.* maps get BPF_F_RDONLY_PROG.  A plain .data
 * section is present too, for contrast ("custom_s.data").
 *
 * Sections: .data.foo               foo_counter (u32), foo_blob[13] (u8) -> 17 bytes
 *           .data.long_section_name long_a (u64), long_b (u16)          -> 10 bytes
 *           .rodata.bar             bar_limit (u32), bar_name[7] (char)  -> 11 bytes
 *           .data                   plain (u32)                          -> 4 bytes
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__u32 foo_counter SEC(".data.foo") = 1;
__u8 foo_blob[13] SEC(".data.foo") = { 0xaa };

__u64 long_a SEC(".data.long_section_name") = 42;
__u16 long_b SEC(".data.long_section_name") = 7;

const volatile __u32 bar_limit SEC(".rodata.bar") = 100;
const volatile char bar_name[7] SEC(".rodata.bar") = "barbar";

__u32 plain = 9;

SEC("tc")
int custom_sections_tc(struct __sk_buff *skb)
{
	foo_counter++;
	foo_blob[skb->len & 7] = bar_name[0];
	long_a += skb->len;
	long_b = skb->protocol;
	plain++;
	return foo_counter > bar_limit ? 2 : 0;
}

char LICENSE[] SEC("license") = "GPL";
