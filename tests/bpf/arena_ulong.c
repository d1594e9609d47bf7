// SPDX-License-Identifier: GPL-2.0
/*
 * arena_ulong.c - BPF_MAP_TYPE_ARENA (33) with map_extra given by __ulong().
 *
 * Covers: the __ulong(name, val) definition form of newer bpf_helpers.h,
 * defined here because libbpf 1.1's headers lack it.  It encodes the value
 * as an anonymous enum member: `enum { __unique_valueN = val } map_extra`.
 *
 * NOT openable by libbpf 1.1: it only accepts map_extra as PTR-to-ARRAY
 * and fails with "map 'arena_hi': attr 'map_extra': expected PTR, got
 * enum." (libbpf >= 1.4 accepts the enum form).
 * clang 14 has no BTF_KIND_ENUM64 (clang >= 15 emits ENUM64 for 64-bit
 * values): it emits BTF_KIND_ENUM, of size 4 here because the value fits
 * in 32 bits (a larger value gives size 8 with only the low 32 bits kept),
 * so the address below is kept under 4 GiB on purpose (0xc0000000).
 *
 * Maps (key/value bytes, max_entries, flags, map_extra):
 *   arena_hi   0 / 0   100 pages  MMAPABLE  0xc0000000 (via __ulong)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MAP_TYPE_ARENA 33	/* BPF_MAP_TYPE_ARENA, Linux 6.9 */

#define __bpfmem_cat2(a, b) a##b
#define __bpfmem_cat(a, b) __bpfmem_cat2(a, b)
#ifndef __ulong
#define __ulong(name, val) enum { __bpfmem_cat(__unique_value, __COUNTER__) = val } name
#endif

struct {
	__uint(type, MAP_TYPE_ARENA);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 100);
	__ulong(map_extra, 0xc0000000ULL);
} arena_hi SEC(".maps");

char LICENSE[] SEC("license") = "GPL";
