// SPDX-License-Identifier: GPL-2.0
/*
 * prog_array.c - BPF_MAP_TYPE_PROG_ARRAY (tail calls).
 *
 * Covers: a prog array with initial programs
 * (__array(values, int ()) + .values = { [0] = &prog_x, [2] = &prog_y }),
 * plus a prog array without initial values in the size-only form.
 * value_size is 4 (a program fd) in both.
 *
 * libbpf 1.1 limitation: the initial slots are filled after programs are
 * loaded, from bpf_program__fd().  With autoload turned off for every
 * program that returns an error code instead of an fd, so
 * bpf_object__load() fails with EBADF ("failed to initialize slot [0] to
 * prog 'prog_x' fd=-2: -9") after all maps have been created.  Loading with programs enabled works (the programs are
 * verifier-clean).
 *
 * Maps (key/value bytes, max_entries, flags):
 *   jmp_table        4 / 4      5  0   slots 0 -> prog_x, 2 -> prog_y
 *   jmp_table_empty  4 / 4   1000  0
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int prog_x(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int prog_y(struct xdp_md *ctx)
{
	return XDP_DROP;
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 5);
	__uint(key_size, sizeof(__u32));
	__array(values, int ());
} jmp_table SEC(".maps") = {
	.values = {
		[0] = (void *)&prog_x,
		[2] = (void *)&prog_y,
	},
};

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1000);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} jmp_table_empty SEC(".maps");

SEC("xdp")
int dispatcher(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jmp_table, ctx->rx_queue_index & 3);
	bpf_tail_call(ctx, &jmp_table_empty, ctx->ingress_ifindex);
	return XDP_ABORTED;
}

char LICENSE[] SEC("license") = "GPL";
