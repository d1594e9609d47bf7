// SPDX-License-Identifier: GPL-2.0
/*
 * advise_special.c - advisor fixture: map types written or used through
 * their own helpers rather than lookup/update.
 *
 * Covers: bpf_map_push_elem() on a queue, bpf_ringbuf_output() on a ring
 * buffer, bpf_tail_call() on a prog array (no initial slots: user space
 * fills it), and a .bss counter bumped with an atomic add through the
 * global-data pointer.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   queue_pushed   QUEUE       0 / 16   128   0   push_xdp   push
 *   rb_output      RINGBUF     0 / 0   4096   0   rb_xdp     ringbuf_output
 *   jump_table     PROG_ARRAY  4 / 4      8   0   tail_xdp   tail_call
 *   advise_s.bss   ARRAY       4 / 8      1   MMAPABLE   push_xdp, rb_xdp,
 *                  tail_xdp    atomic add (libbpf's name for .bss of
 *                  object "advise_special")
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct event {
	__u64 len;
	__u32 ifindex;
	__u32 queue;
};

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 128);
	__type(value, struct event);
} queue_pushed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} rb_output SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 8);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} jump_table SEC(".maps");

/* .bss */
__u64 events_seen;

SEC("xdp")
int push_xdp(struct xdp_md *ctx)
{
	struct event ev = {
		.len = ctx->data_end - ctx->data,
		.ifindex = ctx->ingress_ifindex,
		.queue = ctx->rx_queue_index,
	};

	bpf_map_push_elem(&queue_pushed, &ev, BPF_EXIST);
	__sync_fetch_and_add(&events_seen, 1);
	return XDP_PASS;
}

SEC("xdp")
int rb_xdp(struct xdp_md *ctx)
{
	struct event ev = {
		.len = ctx->data_end - ctx->data,
		.ifindex = ctx->ingress_ifindex,
		.queue = ctx->rx_queue_index,
	};

	bpf_ringbuf_output(&rb_output, &ev, sizeof(ev), 0);
	__sync_fetch_and_add(&events_seen, 1);
	return XDP_PASS;
}

SEC("xdp")
int tail_xdp(struct xdp_md *ctx)
{
	__sync_fetch_and_add(&events_seen, 1);
	bpf_tail_call(ctx, &jump_table, ctx->rx_queue_index & 7);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
