// SPDX-License-Identifier: GPL-2.0
/*
 * queue_stack.c - BPF_MAP_TYPE_QUEUE and BPF_MAP_TYPE_STACK.
 *
 * Covers: keyless maps (key_size 0) defined with only a value, once as a
 * BTF type and once as value_size.  libbpf never passes BTF ids for
 * queue/stack maps.  Queue/stack maps are always preallocated.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   event_queue   0 / 13    100  0          __type(value)
 *   undo_stack    0 / 7     256  0          __uint(value_size)
 *   ro_queue      0 / 100    10  RDONLY_PROG
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct event13 {
	__u64 ts;
	__u32 pid;
	__u8 kind;
} __attribute__((packed));

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 100);
	__type(value, struct event13);
} event_queue SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK);
	__uint(max_entries, 256);
	__uint(value_size, 7);
} undo_stack SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 10);
	__uint(map_flags, BPF_F_RDONLY_PROG);
	__uint(value_size, 100);
} ro_queue SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_kill")
int queue_stack_tp(void *ctx)
{
	struct event13 ev = {};
	__u8 undo[7] = {};
	__u8 cfg[100];

	ev.ts = bpf_ktime_get_ns();
	ev.pid = bpf_get_current_pid_tgid() >> 32;
	bpf_map_push_elem(&event_queue, &ev, BPF_EXIST);
	if (bpf_map_pop_elem(&undo_stack, undo) == 0)
		undo[0]++;
	bpf_map_push_elem(&undo_stack, undo, 0);
	bpf_map_peek_elem(&ro_queue, cfg);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
