// SPDX-License-Identifier: GPL-2.0
/*
 * cni_v060_before.bpf.c - release v0.6.0 of a CNI-like datapath, BEFORE the
 * map memory fix.  Written for bpfmem's examples; not taken from any project.
 *
 * v0.6.0 adds "service route" maps to the v0.5.4 datapath (cni_v054.bpf.c).
 * Userspace (the agent and a router daemon) writes five policy/route tables;
 * the XDP and tc programs below only look them up.  The datapath itself
 * writes conntrack_table and service_reverse_table.
 *
 * The five userspace-written tables are plain hashes, so the kernel
 * preallocates every element when the map is created, and charges all of it
 * to the memory cgroup of the process that creates the map:
 *
 *   map                          type       key/value  max_entries
 *   service_route_table          hash         20/72        65536   new, pinned
 *   service_access_table         hash          8/24        65536   new, pinned
 *   service_deny_table           hash          8/16        32768   new, pinned
 *   service_remote_grant_table   hash         16/48        32768   new, pinned
 *   attachment_identity_table    hash         20/72        32768   new, pinned
 *   service_reverse_table        lru_hash     40/56       131072   new, pinned
 *   conntrack_table              lru_hash     40/64        65536   since v0.5.4
 *   metrics_map                  percpu_array  4/32         4096   since v0.5.4
 *   interface_table              array         4/64         4096   since v0.5.4
 *   events                       ringbuf       1 MiB               since v0.5.4
 *   cni_v060.rodata              agent configuration (const volatile)
 *
 * See `bpfmem maps examples/seed/cni_v060_before.bpf.o --kernel 6.18 --cpus 2`
 * for what each one costs, and cni_v060_after.bpf.c for the fix.
 *
 * The datapath itself lives in cni_seed.h, shared by the three releases.
 */
#define WITH_SERVICE_MAPS 1	/* SERVICE_MAP_FLAGS left undefined: preallocated */
#include "cni_seed.h"
