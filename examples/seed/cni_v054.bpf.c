// SPDX-License-Identifier: GPL-2.0
/*
 * cni_v054.bpf.c - release v0.5.4 of a CNI-like datapath, the release nodes
 * upgrade FROM.  Written for bpfmem's examples; not taken from any project.
 *
 * An XDP program counts reply traffic on conntrack entries; a tc program
 * creates and refreshes them.  No service route maps yet: v0.6.0
 * (cni_v060_before.bpf.c) adds them, and none of them is pinned on a node
 * running this release, so the upgraded agent creates (and pays for) all of
 * them at start.
 *
 *   map                          type       key/value  max_entries
 *   conntrack_table              lru_hash     40/64        65536
 *   metrics_map                  percpu_array  4/32         4096
 *   interface_table              array         4/64         4096
 *   events                       ringbuf       1 MiB
 *   cni_v054.rodata              agent configuration (const volatile)
 *
 * The datapath itself lives in cni_seed.h, shared by the three releases.
 */
#define WITH_SERVICE_MAPS 0
#include "cni_seed.h"
