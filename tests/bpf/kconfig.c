// SPDX-License-Identifier: GPL-2.0
/*
 * kconfig.c - extern __kconfig variables (the .kconfig map).
 *
 * Covers: externs resolved by libbpf from /proc/config.gz (or
 * /boot/config-$(uname -r)) and LINUX_KERNEL_VERSION from uname.  They live
 * in no ELF section: clang records them as UND symbols plus a BTF DATASEC
 * ".kconfig" (size 0 in the object).  libbpf lays them out itself: sorted
 * by alignment (descending), then size (ascending), then name, each at its
 * natural alignment, into one internal array map named
 * "<obj prefix>.kconfig" ("kconfig.kconfig" here: 7 object-name chars +
 * ".kconfig") with BPF_F_RDONLY_PROG, frozen after load.  Here:
 * NR_CPUS@0, HZ@8, NET_CLS_BPF@12, LINUX_KERNEL_VERSION@16,
 * BPFMEM_MISSING@20, BPF_JIT@21, BPF_SYSCALL@22, DEFAULT_HOSTNAME@23
 * -> value_size 39.  __weak externs may be missing (value 0 / 'n').
 *
 * Externs (type, size): LINUX_KERNEL_VERSION u32 4, CONFIG_HZ int 4,
 *   CONFIG_BPF_SYSCALL bool 1, CONFIG_BPF_JIT char 1 ('y'),
 *   CONFIG_NR_CPUS u64 8, CONFIG_NET_CLS_BPF enum libbpf_tristate 4,
 *   CONFIG_DEFAULT_HOSTNAME char[16] (string), CONFIG_BPFMEM_MISSING bool 1
 *   (__weak, absent from every config).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern __u32 LINUX_KERNEL_VERSION __kconfig;
extern int CONFIG_HZ __kconfig;
extern _Bool CONFIG_BPF_SYSCALL __kconfig;
extern char CONFIG_BPF_JIT __kconfig;
extern unsigned long long CONFIG_NR_CPUS __kconfig;
extern enum libbpf_tristate CONFIG_NET_CLS_BPF __kconfig;
extern char CONFIG_DEFAULT_HOSTNAME[16] __kconfig __weak;
extern _Bool CONFIG_BPFMEM_MISSING __kconfig __weak;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} kconfig_seen SEC(".maps");

static __always_inline void record(__u32 idx, __u64 val)
{
	bpf_map_update_elem(&kconfig_seen, &idx, &val, BPF_ANY);
}

SEC("tracepoint/syscalls/sys_enter_getpid")
int kconfig_tp(void *ctx)
{
	record(0, LINUX_KERNEL_VERSION);
	record(1, CONFIG_HZ);
	record(2, CONFIG_BPF_SYSCALL);
	record(3, CONFIG_BPF_JIT == 'y');
	record(4, CONFIG_NR_CPUS);
	record(5, CONFIG_NET_CLS_BPF == TRI_YES);
	record(6, CONFIG_DEFAULT_HOSTNAME[0]);
	record(7, CONFIG_BPFMEM_MISSING);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
