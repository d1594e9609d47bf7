// SPDX-License-Identifier: GPL-2.0
/*
 * perf_ringbuf.c - PERF_EVENT_ARRAY, RINGBUF and USER_RINGBUF.
 *
 * Covers:
 *   - perf_events: perf event array with no max_entries; libbpf sets
 *     max_entries to the number of possible CPUs at load time.
 *   - perf_events_64: perf event array with an explicit max_entries.
 *   - ringbuf sizes: the kernel wants a power-of-two multiple of the page
 *     size.  libbpf 1.1 rounds other sizes up already at open time
 *     (adjust_ringbuf_sz): rb_odd 10000 -> 16384, user_rb 12288 -> 16384
 *     with 4 KiB pages; rb_256k is passed through unchanged.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   perf_events     4 / 4   (unset -> nr possible CPUs)  0   size-only
 *   perf_events_64  4 / 4   64                           0   __type()
 *   rb_256k         0 / 0   262144                       0
 *   rb_odd          0 / 0   10000 (libbpf: 16384)        0
 *   user_rb         0 / 0   12288 (libbpf: 16384)        0
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct sample {
	__u64 ts;
	__u32 cpu;
	__u8 comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(int));
	__uint(value_size, sizeof(__u32));
} perf_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(max_entries, 64);
	__type(key, int);
	__type(value, __u32);
} perf_events_64 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} rb_256k SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 10000);
} rb_odd SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_USER_RINGBUF);
	__uint(max_entries, 3 * 4096);
} user_rb SEC(".maps");

static long on_user_sample(struct bpf_dynptr *dynptr, void *ctx)
{
	return 0;
}

SEC("tracepoint/sched/sched_process_exec")
int perf_ringbuf_tp(void *ctx)
{
	struct sample s = {};

	s.ts = bpf_ktime_get_ns();
	s.cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(s.comm, sizeof(s.comm));
	bpf_perf_event_output(ctx, &perf_events, BPF_F_CURRENT_CPU, &s, sizeof(s));
	bpf_perf_event_output(ctx, &perf_events_64, BPF_F_CURRENT_CPU, &s, sizeof(s));
	bpf_ringbuf_output(&rb_256k, &s, sizeof(s), 0);
	bpf_ringbuf_output(&rb_odd, &s, sizeof(s), BPF_RB_FORCE_WAKEUP);
	bpf_user_ringbuf_drain(&user_rb, on_user_sample, NULL, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
