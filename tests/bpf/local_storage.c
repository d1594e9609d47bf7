// SPDX-License-Identifier: GPL-2.0
/*
 * local_storage.c - SK_STORAGE, INODE_STORAGE, TASK_STORAGE, CGRP_STORAGE.
 *
 * Covers: object-local storages.  The kernel requires key_size 4 (int),
 * max_entries 0, BPF_F_NO_PREALLOC and BTF key/value type ids for all of
 * them; values are allocated per socket/inode/task/cgroup on demand.
 * sk_storage additionally uses BPF_F_CLONE (copied to child sockets).
 * BPF_MAP_TYPE_CGRP_STORAGE (32) is missing from Debian 12's
 * linux-libc-dev 6.1 headers, so its numeric value is used.
 * The programs exist to show the helper calls and map relocations; they
 * are not meant to pass the verifier (lsm/ and tp_btf/ need tracing/LSM
 * program support, bpf_task_storage_get wants a BTF task pointer).
 *
 * Maps (key/value bytes, max_entries, flags):
 *   sk_store       4 / 13    0  NO_PREALLOC|CLONE
 *   inode_store    4 / 100   0  NO_PREALLOC
 *   task_store     4 / 7     0  NO_PREALLOC
 *   cgrp_store     4 / 24    0  NO_PREALLOC      (type 32)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MAP_TYPE_CGRP_STORAGE 32	/* BPF_MAP_TYPE_CGRP_STORAGE, Linux 6.2 */

struct sk_val13 {
	__u64 first_seen;
	__u32 rx;
	__u8 mark;
} __attribute__((packed));

struct inode_val100 {
	__u8 label[100];
};

struct task_val7 {
	__u8 b[7];
};

struct cgrp_val24 {
	__u64 created_ns;
	__u64 procs;
	__u32 id;
	__u32 flags;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct sk_val13);
} sk_store SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_INODE_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct inode_val100);
} inode_store SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_val7);
} task_store SEC(".maps");

struct {
	__uint(type, MAP_TYPE_CGRP_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cgrp_val24);
} cgrp_store SEC(".maps");

SEC("cgroup_skb/egress")
int sk_storage_egress(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	struct sk_val13 *v;

	if (!sk)
		return 1;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 1;
	v = bpf_sk_storage_get(&sk_store, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (v)
		v->rx++;
	return 1;
}

SEC("tracepoint/sched/sched_process_fork")
int task_storage_tp(void *ctx)
{
	struct task_val7 *v;

	v = bpf_task_storage_get(&task_store, (void *)bpf_get_current_task(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (v)
		v->b[0]++;
	return 0;
}

/* lsm/inode_unlink(struct inode *dir, struct dentry *dentry) */
SEC("lsm/inode_unlink")
int inode_storage_lsm(unsigned long long *ctx)
{
	struct inode_val100 *v;

	v = bpf_inode_storage_get(&inode_store, (void *)ctx[0], 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (v)
		v->label[0] = 'x';
	return 0;
}

/* tp_btf/cgroup_mkdir(struct cgroup *cgrp, const char *path) */
SEC("tp_btf/cgroup_mkdir")
int cgrp_storage_tp(unsigned long long *ctx)
{
	struct cgrp_val24 *v;

	v = bpf_cgrp_storage_get(&cgrp_store, (void *)ctx[0], 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (v)
		v->created_ns = bpf_ktime_get_ns();
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
