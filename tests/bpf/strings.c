// SPDX-License-Identifier: GPL-2.0
/*
 * strings.c - string literals: .rodata.str1.1 and bpf_printk formats.
 *
 * Covers: string literals passed directly to helpers land in the mergeable
 * string section ".rodata.str1.1" (SHF_MERGE|SHF_STRINGS); libbpf turns it
 * into an internal map named ".rodata.str1.1" (used as-is: it has a second
 * dot) with BPF_F_RDONLY_PROG but without BTF value type and without
 * BPF_F_MMAPABLE, since clang emits no BTF DATASEC for it.
 * bpf_printk() from libbpf 1.1 declares `static const char ____fmt[]`
 * arrays, which clang places in ".rodata" instead ("strings.rodata"),
 * again with no exposed globals so no BPF_F_MMAPABLE.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("kprobe/do_nanosleep")
int strings_kprobe(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	/* literal -> .rodata.str1.1 */
	bpf_trace_printk("direct literal pid=%d\n", sizeof("direct literal pid=%d\n"), pid);
	/* static const array -> .rodata */
	bpf_printk("bpf_printk pid=%d", pid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
