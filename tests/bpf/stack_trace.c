// SPDX-License-Identifier: GPL-2.0
/*
 * stack_trace.c - BPF_MAP_TYPE_STACK_TRACE.
 *
 * Covers: stack trace maps defined with key_size/value_size (the value is
 * an array of instruction pointers, 8 bytes per frame; 127 frames is the
 * default kernel.perf_event_max_stack), and a build-id stack map
 * (BPF_F_STACK_BUILD_ID, 32-byte struct bpf_stack_build_id per frame).
 * libbpf never passes BTF key/value ids for stack trace maps.  The kernel
 * sizes its bucket array by max_entries rounded up to a power of two.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   stacks_ip        4 / 1016  1000  0               (127 frames)
 *   stacks_short     4 / 160     77  0               __type(value, __u64[20])
 *   stacks_build_id  4 / 320     64  STACK_BUILD_ID  (10 frames)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1000);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));
} stacks_ip SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 77);
	__type(key, __u32);
	__type(value, __u64[20]);
} stacks_short SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 64);
	__uint(map_flags, BPF_F_STACK_BUILD_ID);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 10 * sizeof(struct bpf_stack_build_id));
} stacks_build_id SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);	/* pid */
	__type(value, __s64[3]);	/* stack ids */
} stack_ids_by_pid SEC(".maps");

SEC("tracepoint/sched/sched_switch")
int stack_trace_tp(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid();
	__s64 ids[3];

	ids[0] = bpf_get_stackid(ctx, &stacks_ip, 0);
	ids[1] = bpf_get_stackid(ctx, &stacks_short, BPF_F_USER_STACK);
	ids[2] = bpf_get_stackid(ctx, &stacks_build_id, BPF_F_USER_STACK);
	bpf_map_update_elem(&stack_ids_by_pid, &pid, ids, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
