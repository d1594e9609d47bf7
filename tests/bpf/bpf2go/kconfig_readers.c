// SPDX-License-Identifier: GPL-2.0
/*
 * kconfig_readers.c - a (non-weak) .kconfig extern read by two programs.
 *
 * Covers: libbpf creates one "<obj>.kconfig" map (externs laid out by alignment); current
 * cilium/ebpf creates a ".kconfig" map each time it loads a program that reads one
 * (linker.go resolveKconfigReferences), laid out in declaration order; cilium/ebpf 0.9.1
 * refuses the object. A weak extern (extern ... __kconfig __weak) is refused by current
 * cilium/ebpf, so there is none here.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern __u32 LINUX_KERNEL_VERSION __kconfig;
extern _Bool LINUX_HAS_SYSCALL_WRAPPER __kconfig;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

SEC("kprobe/do_nanosleep")
int first(void *ctx)
{
	__u32 k = 0;
	__u64 v = LINUX_KERNEL_VERSION;

	bpf_map_update_elem(&seen, &k, &v, BPF_ANY);
	return 0;
}

SEC("kprobe/do_sys_openat2")
int second(void *ctx)
{
	__u32 k = 1;
	__u64 v = LINUX_HAS_SYSCALL_WRAPPER;

	bpf_map_update_elem(&seen, &k, &v, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
