// SPDX-License-Identifier: GPL-2.0
/*
 * arena.c - BPF_MAP_TYPE_ARENA (33) with a 32-bit map_extra.
 *
 * Covers: an arena map as libbpf 1.1 can still express it.  The type is
 * numeric because Debian 12's linux-libc-dev 6.1 headers predate
 * BPF_MAP_TYPE_ARENA (Linux 6.9).  The kernel wants key_size 0,
 * value_size 0, BPF_F_MMAPABLE, max_entries = number of pages (<= 4 GiB of
 * address space) and map_extra = page-aligned user-space start address
 * (0 = pick one) whose range must not cross a 4 GiB boundary.
 * map_extra is written with __uint(), which encodes the value as the
 * element count of an int array; BTF array byte sizes must fit in 32 bits,
 * so with __uint() the address must stay below 1 GiB (4-byte ints), or the
 * kernel rejects the object's BTF ("Array size overflows U32_MAX") and
 * libbpf silently creates every map without BTF.  See arena_ulong.c for the
 * __ulong() form newer libbpf uses.
 *
 * libbpf 1.1 knows nothing about arenas: it creates the map like any
 * other (no mmap of the arena, no .addr_space.1 handling), which is all we
 * need here.  No program: arena programs need the arena kfuncs and
 * address-space casts that clang 14 / libbpf 1.1 cannot produce.
 *
 * Maps (key/value bytes, max_entries, flags, map_extra):
 *   arena_small   0 / 0    16 pages  MMAPABLE  0x10000000
 *   arena_anywhere 0 / 0  1000 pages MMAPABLE  (unset)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MAP_TYPE_ARENA 33	/* BPF_MAP_TYPE_ARENA, Linux 6.9 */

struct {
	__uint(type, MAP_TYPE_ARENA);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 16);
	__uint(map_extra, 0x10000000);
} arena_small SEC(".maps");

struct {
	__uint(type, MAP_TYPE_ARENA);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1000);
} arena_anywhere SEC(".maps");

char LICENSE[] SEC("license") = "GPL";
