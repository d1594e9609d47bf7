// SPDX-License-Identifier: GPL-2.0
/*
 * prog_sections.c - programs in many ELF sections sharing maps through a
 * .text subprogram.
 *
 * Covers: one program per section kind (xdp, tc, classifier, socket,
 * kprobe/, tracepoint/, raw_tp/, cgroup_skb/ingress, sk_msg, sk_skb,
 * sk_skb/stream_verdict, fentry/), each calling
 *   - bump(): a `static __noinline` subprogram that clang places in .text
 *     and that looks up sec_hits, so the map relocation sits in .text, and
 *   - note_len(): a global (non-static) __noinline function, also in .text,
 *     that updates last_len.
 * libbpf appends the .text subprograms to every program that calls them.
 * fentry/ needs kernel tracing support to load, so this object is only
 * checked with autoload off.
 *
 * Maps (key/value bytes, max_entries, flags):
 *   sec_hits   4 / 8    16  0      array, touched only from bump()
 *   last_len   4 / 4    16  0      hash, touched only from note_len()
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} sec_hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} last_len SEC(".maps");

static __noinline int bump(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&sec_hits, &idx);

	if (c)
		__sync_fetch_and_add(c, 1);
	return 0;
}

__noinline int note_len(__u32 idx, __u32 len)
{
	bpf_map_update_elem(&last_len, &idx, &len, BPF_ANY);
	return 0;
}

SEC("xdp")
int sec_xdp(struct xdp_md *ctx)
{
	bump(0);
	note_len(0, ctx->data_end - ctx->data);
	return XDP_PASS;
}

SEC("tc")
int sec_tc(struct __sk_buff *skb)
{
	bump(1);
	note_len(1, skb->len);
	return 0;
}

SEC("classifier")
int sec_classifier(struct __sk_buff *skb)
{
	bump(2);
	return 0;
}

SEC("socket")
int sec_socket(struct __sk_buff *skb)
{
	bump(3);
	note_len(3, skb->len);
	return skb->len;
}

SEC("kprobe/do_unlinkat")
int sec_kprobe(void *ctx)
{
	bump(4);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_openat")
int sec_tracepoint(void *ctx)
{
	bump(5);
	return 0;
}

SEC("raw_tp/sched_switch")
int sec_raw_tp(void *ctx)
{
	bump(6);
	return 0;
}

SEC("cgroup_skb/ingress")
int sec_cgroup_skb(struct __sk_buff *skb)
{
	bump(7);
	note_len(7, skb->len);
	return 1;
}

SEC("sk_msg")
int sec_sk_msg(struct sk_msg_md *msg)
{
	bump(8);
	note_len(8, msg->size);
	return SK_PASS;
}

SEC("sk_skb")
int sec_sk_skb(struct __sk_buff *skb)
{
	bump(9);
	return SK_PASS;
}

SEC("sk_skb/stream_verdict")
int sec_sk_skb_verdict(struct __sk_buff *skb)
{
	bump(10);
	return SK_PASS;
}

SEC("fentry/do_unlinkat")
int sec_fentry(unsigned long long *ctx)
{
	bump(11);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
