// SPDX-License-Identifier: GPL-2.0
/*
 * ringbuf_perf.c - what bpf2go agents write for events: a ring buffer and perf event arrays
 * annotated with __type() so bpf2go generates Go types for them.
 *
 * Covers (cilium/ebpf current; see tests/test_cilium_current.py):
 *   events        ringbuf, __type(value, struct event): cilium/ebpf drops the value size
 *                 (libbpf keeps 24 and the kernel refuses the map)
 *   events_odd    ringbuf of 10000 bytes: libbpf rounds to 16384, cilium/ebpf does not
 *                 (the kernel refuses it)
 *   perf_plain    perf event array without key/value size or max_entries: cilium/ebpf
 *                 sets 4/4 and the possible CPUs (libbpf: 0/0, refused by the kernel)
 *   perf_big      perf event array with max_entries 1024: cilium/ebpf clamps it to the
 *                 possible CPUs; libbpf keeps 1024
 *   cpus          cpumap with max_entries 64: cilium/ebpf clamps it to the possible CPUs
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct event {
	__u64 ts;
	__u32 pid;
	__u8 comm[12];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
	__type(value, struct event);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 10000);
} events_odd SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
} perf_plain SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} perf_big SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpus SEC(".maps");

SEC("kprobe/sys_execve")
int trace_exec(void *ctx)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	struct event ev = {};

	if (e) {
		e->ts = bpf_ktime_get_ns();
		bpf_ringbuf_submit(e, 0);
	}
	bpf_ringbuf_output(&events_odd, &ev, sizeof(ev), 0);
	bpf_perf_event_output(ctx, &perf_plain, BPF_F_CURRENT_CPU, &ev, sizeof(ev));
	bpf_perf_event_output(ctx, &perf_big, BPF_F_CURRENT_CPU, &ev, sizeof(ev));
	return 0;
}

SEC("xdp")
int redirect_cpu(struct xdp_md *ctx)
{
	return bpf_redirect_map(&cpus, 0, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
