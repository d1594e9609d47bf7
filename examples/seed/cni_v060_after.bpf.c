// SPDX-License-Identifier: GPL-2.0
/*
 * cni_v060_after.bpf.c - release v0.6.0 of a CNI-like datapath, AFTER the
 * map memory fix.  Written for bpfmem's examples; not taken from any project.
 *
 * Identical to cni_v060_before.bpf.c except for one flag: the five service
 * tables that only userspace writes are BPF_F_NO_PREALLOC.  The kernel then
 * allocates only their bucket arrays when the map is created and charges a
 * row to the writer's memory cgroup when the row is inserted.  The datapath
 * only looks these rows up, so the per-packet path never allocates.
 *
 * service_reverse_table stays preallocated: the datapath writes it, and an
 * LRU hash is always preallocated (the kernel refuses BPF_F_NO_PREALLOC).
 *
 *   map                          type       key/value  max_entries
 *   service_route_table          hash         20/72        65536   no_prealloc, pinned
 *   service_access_table         hash          8/24        65536   no_prealloc, pinned
 *   service_deny_table           hash          8/16        32768   no_prealloc, pinned
 *   service_remote_grant_table   hash         16/48        32768   no_prealloc, pinned
 *   attachment_identity_table    hash         20/72        32768   no_prealloc, pinned
 *   service_reverse_table        lru_hash     40/56       131072   pinned
 *   conntrack_table              lru_hash     40/64        65536   since v0.5.4
 *   metrics_map                  percpu_array  4/32         4096   since v0.5.4
 *   interface_table              array         4/64         4096   since v0.5.4
 *   events                       ringbuf       1 MiB               since v0.5.4
 *   cni_v060.rodata              agent configuration (const volatile)
 *
 * The flag changes the maps' definition, so a node that already has the five
 * pinned from cni_v060_before must unpin them and let the loader recreate them.
 *
 * The datapath itself lives in cni_seed.h, shared by the three releases.
 */
#define WITH_SERVICE_MAPS 1
#define SERVICE_MAP_FLAGS BPF_F_NO_PREALLOC
#include "cni_seed.h"
