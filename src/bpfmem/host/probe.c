/*
 * bpfmem probe: create BPF maps, fill them, and report what the kernel charges for them.
 *
 * Build:  gcc -O2 -static -o probe probe.c      (no libbpf; raw bpf(2) syscalls)
 *
 * Usage:
 *   probe SPECFILE [--cgroup-v1 DIR | --cgroup-v2 DIR | --no-cgroup] [--flush-cgroup DIR]
 *                  [--one-cgroup] [--overlap-frees]
 *   probe --btf-sizes name1,name2,...        print {"sizes":{...}} from /sys/kernel/btf/vmlinux
 *   As pid 1 (the /init of an initramfs): reads /specs.txt, mounts /proc, /sys, /dev and cgroup2,
 *   creates the cgroups bpfmem-probe and bpfmem-flush, writes to /dev/console, powers off;
 *   --one-cgroup and --overlap-frees after "--" on the kernel command line.
 *
 * Spec file: one item per line; blank lines and lines starting with '#' are ignored.
 *   sizes NAME,NAME,...
 *       print {"sizes":{NAME:bytes|null,...}} (struct/union sizes from the kernel's BTF)
 *   ID TYPE KEY_SIZE VALUE_SIZE MAX_ENTRIES MAP_FLAGS MAP_EXTRA FILLS
 *       ID          a token without blanks (echoed back as a JSON string)
 *       TYPE        map type number (1..33) or libbpf name (hash, lru_percpu_hash, ...)
 *       numbers     decimal or 0x-hex (map_flags, map_extra may be hex)
 *       FILLS       comma list of element counts to reach, in order ("0,500,1000"), or "-"
 *
 * Output: one JSON object per line.
 *   {"probe":"bpfmem","kernel":REL,"machine":UNAME_M,"nr_cpus":NR_CPUS|-1,"possible_cpus":N,"online_cpus":N,"page_size":N,
 *    "cgroup":"v1"|"v2"|"none","counter":FILE|null,"flush":true|false,"pid1":bool,
 *    "spec_cgroups":bool,"thp_enabled":bool|null}
 *   {"sizes":{...}}                                    (for a "sizes" line / --btf-sizes)
 *   {"id":ID,"type":T,"ok":false,"errno":E,"error":"create"}  (rejected create)
 *   {"id":ID,"type":T,"ok":true,"memlock":B|null,"max_entries":M'|null,"charged":B|null,
 *    "outside":B|null,
 *    "fills":[{"n":N,"inserted":I,"memlock":B,"charged":B,"outside":B|null,"errno":E}...],
 *    "fill_error":null|"unsupported"|"insert failed","fill_enomem_retries":R,
 *    "fill_batch":bool (map-in-map only),"ms":elapsed milliseconds}
 *   {"spec_error":MSG,"line":N,"text":LINE}            (unparsable spec line)
 *   progs OBJ   (spec line, as pid 1) run /progprobe OBJ in the measured cgroup and its flush
 *               sibling (a VM's initramfs carries the program probe, progprobe.c, statically
 *               linked with libbpf, and the objects): its JSON lines, as it prints them, each
 *               with "obj":OBJ added; {"progs_error":MSG,"obj":OBJ,"errno":E} when it cannot
 *               run or fails
 *   prog ID N   (spec line) load a straight-line socket filter of N instructions (r0 = 0,
 *               N-2 x r0 += 1, exit) and report what its load charged:
 *   {"id":ID,"prog":true,"insns":N,"ok":bool,"errno":E,"memlock":B|null,"charged":B|null,
 *    "peak_sampled":B|null,"peak":B|null}
 *   "charged" what stays charged once loaded (counter delta against the reading before,
 *   both taken while the sampler child exists);
 *   "peak_sampled" the highest raw counter reading a forked sampler saw during the load,
 *   less the reading before (raw: it may include up to a stock batch per CPU);
 *   "peak" the v1 kmem watermark (reset before the load) less the reading before.
 *   {"id":ID,"type":26,"ok":false,"errno":null,"error":"skipped: struct_ops"}
 *   {"done":true}
 * "charged" is always the delta of the memory cgroup counter against a reading taken right
 * before BPF_MAP_CREATE (so fill readings are cumulative, including the create). "inserted"
 * is the total number of elements in the map after that level. "errno" in a fill is 0, or the
 * errno of the insert that stopped the fill (later levels are then skipped). Keys: the element
 * index, little-endian in KEY_SIZE bytes (arrays: u32 index; LPM: prefixlen 8*(K-4), index
 * big-endian in the data); queue/stack/bloom push values with a NULL key; array/hash of maps
 * store the fd of an inner array template (BPF_MAP_UPDATE_BATCH when the kernel allows it,
 * since each single map-in-map update waits for an RCU grace period). Fillable: hash, array,
 * percpu hash/array, lru (percpu) hash, lpm, array/hash of maps, queue, stack, bloom filter,
 * devmap and devmap_hash (value: ifindex 1, the loopback device; no program);
 * any other type with fills reports "fill_error":"unsupported". An insert failing with ENOMEM
 * is retried up to 20 times, 20 ms apart. RLIMIT_MEMLOCK is raised to infinity first (<= 5.10).
 * Transparent huge pages are off for the probe and what it runs (PR_SET_THP_DISABLE: see
 * no_huge_pages() in cgcounter.h); "thp_enabled" in the header is the kernel's word for it.
 *
 * Every counter reading is preceded by a stock flush: the probe moves itself into the flush
 * cgroup, charges a slab object (an open file) and an anon page there on every online CPU,
 * moves back and pins itself to CPU 0 again. That drains the per-CPU memcg byte and page
 * stocks holding charges of the measured cgroup. A reading is repeated until two in a row
 * agree (deferred work such as bpf_mem_alloc refills), and after closing a map the probe
 * waits (synchronize_rcu via membarrier, then three equal readings) until its deferred
 * freeing has shown.
 *
 * Each spec (map or prog) is measured in a fresh memory cgroup of its own, a child s<N> of
 * the cgroup given ("spec_cgroups":true), removed after it: a charge stays with the cgroup
 * it was made in, so an earlier map's freeing that runs late (a kworker's vfree starved
 * under load, an RCU callback) uncharges that map's cgroup and never lands between a later
 * spec's readings (the wait above alone cannot promise that: it gives up after seconds).
 * On cgroup2 the probe waits in the flush cgroup between specs (a cgroup2 cgroup handing
 * memory to children may hold no process). "outside" is what the cgroup given (which
 * counts all the specs' cgroups) moved by meanwhile beyond the spec's own "charged": the
 * late freeing of earlier maps, which per-spec cgroups keep out of "charged" (null with
 * --one-cgroup). --one-cgroup measures every spec in the cgroup given; --overlap-frees
 * closes each map only after the next spec's first reading (and waits for its freeing
 * there), a test of the isolation: with --one-cgroup that freeing shows in the next spec's
 * numbers, without it must not.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <linux/bpf.h>

#include "cgcounter.h"

#ifndef __NR_bpf
#define __NR_bpf 321
#endif

/* map types newer than some uapi headers */
#define MT_HASH 1
#define MT_ARRAY 2
#define MT_PERCPU_HASH 5
#define MT_PERCPU_ARRAY 6
#define MT_LRU_HASH 9
#define MT_LRU_PERCPU_HASH 10
#define MT_LPM_TRIE 11
#define MT_ARRAY_OF_MAPS 12
#define MT_DEVMAP 14
#define MT_HASH_OF_MAPS 13
#define MT_QUEUE 22
#define MT_STACK 23
#define MT_SK_STORAGE 24
#define MT_STRUCT_OPS 26
#define MT_INODE_STORAGE 28
#define MT_DEVMAP_HASH 25
#define MT_TASK_STORAGE 29
#define MT_BLOOM_FILTER 30
#define MT_USER_RINGBUF 31
#define MT_CGRP_STORAGE 32
#define MT_ARENA 33

#define BTF_MAGIC_ 0xeB9F
#define BTF_KIND_INT_ 1
#define BTF_KIND_ARRAY_ 3
#define BTF_KIND_STRUCT_ 4
#define BTF_KIND_UNION_ 5

static const char *type_names[] = {
    "unspec", "hash", "array", "prog_array", "perf_event_array", "percpu_hash",
    "percpu_array", "stack_trace", "cgroup_array", "lru_hash", "lru_percpu_hash", "lpm_trie",
    "array_of_maps", "hash_of_maps", "devmap", "sockmap", "cpumap", "xskmap", "sockhash",
    "cgroup_storage", "reuseport_sockarray", "percpu_cgroup_storage", "queue", "stack",
    "sk_storage", "devmap_hash", "struct_ops", "ringbuf", "inode_storage", "task_storage",
    "bloom_filter", "user_ringbuf", "cgrp_storage", "arena",
};
#define N_TYPE_NAMES (int)(sizeof(type_names) / sizeof(type_names[0]))

static FILE *out;
static int quiet;  /* warm-up: no output */
static char line_buf[60000];  /* one result line */
static int is_pid1;
static int ncpus_possible = 1;

/* ---- memory cgroup state (and cg_dir, flush_dir, cg_kind, counter_fd: cgcounter.h) ---- */
static char cg_counter[64];  /* counter file name inside cg_dir */
static char cg_base[512];    /* the cgroup given (pid 1: bpfmem-probe); cg_dir: the spec's child */
static int base_fd = -1;     /* its counter (hierarchical: it includes the children's) */
static int thp_enabled = -1;  /* /proc/self/status THP_enabled after no_huge_pages() */
static int one_cgroup;       /* --one-cgroup: measure every spec in cg_base itself */
static int overlap_frees;    /* --overlap-frees: close a map after the next spec's first reading */
static unsigned spec_seq;
static char home_dir[512];   /* where the probe is between specs: cg_base (v1, --one-cgroup);
                              * on cgroup2 the flush cgroup, since a cgroup2 cgroup that hands
                              * memory to its children may hold no process itself */
static long long last_outer = -1;  /* cg_base's counter right after the last spec reading */

/* read_counter(), and cg_base's counter right after it into last_outer */
static long long read_spec_counter(void)
{
    long long c = read_counter();
    last_outer = -1;
    if (counter_fd >= 0 && base_fd >= 0 && base_fd != counter_fd) {
        char buf[64];
        ssize_t n = pread(base_fd, buf, sizeof(buf) - 1, 0);
        if (n > 0) {
            buf[n] = 0;
            last_outer = strtoll(buf, NULL, 10);
        }
    }
    return c;
}

/* "outside": what changed meanwhile in the other specs' cgroups (an earlier map's late
 * freeing), the part of cg_base's delta that is not this spec's own */
static void fmt_outside(char *buf, long long before, long long outer0, long long now)
{
    if (before < 0 || now < 0 || outer0 < 0 || last_outer < 0)
        snprintf(buf, 32, "null");
    else
        snprintf(buf, 32, "%lld", (last_outer - outer0) - (now - before));
}

static void emit(const char *fmt, ...)
{
    char buf[65536];
    va_list ap;
    if (quiet)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 2, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof(buf) - 2)
        n = sizeof(buf) - 2;
    buf[n++] = '\n';
    /* one write per line keeps kernel console messages from splitting it, mostly */
    fwrite(buf, 1, n, out);
    fflush(out);
}

static long sys_bpf(int cmd, union bpf_attr *attr, unsigned size)
{
    return syscall(__NR_bpf, cmd, attr, size);
}

/* "0-1,4,6-7" -> 5 */
static int count_cpu_list(const char *s)
{
    int count = 0;
    while (*s && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s)
            break;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            s = end;
        }
        count += (int)(b - a + 1);
        if (*s == ',')
            s++;
    }
    return count > 0 ? count : 1;
}

/* after closing a map: wait until its (deferred) freeing shows in the counter */
static void settle(void)
{
    if (counter_fd < 0)
        return;
    rcu_sync();
    read_counter_stable(2, 20, 5);
    rcu_sync();
    read_counter_stable(3, 100, 10);
}

/* after closing a map created when the counter read `base`: settle, and keep waiting (up to
 * about 5 s: grace periods are slow under TCG) while the counter is more than a page per CPU
 * above `base`, i.e. while the map's freeing has not all shown yet */
static void settle_to(long long base)
{
    settle();
    if (counter_fd < 0 || base < 0)
        return;
    long long slack = (long long)sysconf(_SC_PAGESIZE) * (ncpus_online + 1);
    for (int i = 0; i < 50 && read_counter() > base + slack; i++) {
        rcu_sync();
        msleep(100);
    }
    settle();
}

static int setup_cgroup(const char *kind, const char *dir)
{
    char path[600];
    cg_kind = kind;
    snprintf(cg_dir, sizeof(cg_dir), "%s", dir);
    snprintf(cg_base, sizeof(cg_base), "%s", dir);
    if (!strcmp(kind, "v1")) {
        snprintf(cg_counter, sizeof(cg_counter), "memory.kmem.usage_in_bytes");
        snprintf(path, sizeof(path), "%s/%s", dir, cg_counter);
        if (access(path, R_OK) != 0)
            snprintf(cg_counter, sizeof(cg_counter), "memory.usage_in_bytes");
    } else {
        snprintf(cg_counter, sizeof(cg_counter), "memory.current");
    }
    snprintf(home_dir, sizeof(home_dir), "%s", dir);
    if (!one_cgroup && strcmp(kind, "v1")) {
        snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
        if (!flush_dir[0] || write_file(path, "+memory") != 0)
            one_cgroup = 1;
        else
            snprintf(home_dir, sizeof(home_dir), "%s", flush_dir);
    }
    if (move_self(home_dir) != 0) {
        fprintf(stderr, "probe: cannot move into %s: %s\n", home_dir, strerror(errno));
        return -1;
    }
    snprintf(cg_dir, sizeof(cg_dir), "%s", home_dir);
    snprintf(path, sizeof(path), "%s/%s", dir, cg_counter);
    counter_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (counter_fd < 0) {
        fprintf(stderr, "probe: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    base_fd = counter_fd;
    return 0;
}

/*
 * Each spec is measured in a cgroup of its own, a fresh child of cg_base: a charge stays
 * with the memory cgroup it was made in, so the deferred freeing of an earlier map (a
 * kworker's vfree, an RCU callback, bpf_mem_alloc's teardown) uncharges that map's cgroup
 * and can never land between this spec's readings, however late it runs. Returns 0 when
 * the probe is in the child (or measures in cg_base: --one-cgroup, no cgroup, mkdir failed).
 */
static int enter_spec_cgroup(void)
{
    if (one_cgroup || base_fd < 0)
        return 0;
    char dir[sizeof(cg_dir)], path[700];
    if ((size_t)snprintf(dir, sizeof(dir), "%.480s/s%u", cg_base, ++spec_seq) >= sizeof(dir))
        return -1;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -1;
    snprintf(path, sizeof(path), "%s/%s", dir, cg_counter);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || move_self(dir) != 0) {
        if (fd >= 0)
            close(fd);
        rmdir(dir);
        return -1;
    }
    snprintf(cg_dir, sizeof(cg_dir), "%s", dir);
    counter_fd = fd;
    return 0;
}

/* back home; the child is removed (what is still charged to it goes to cg_base) unless
 * `keep` (its map still held open, --overlap-frees): then its directory and counter are
 * handed to the caller */
static void leave_spec_cgroup(int keep, char *kept_dir, size_t kept_sz, int *kept_fd)
{
    if (counter_fd == base_fd)
        return;
    move_self(home_dir);
    if (keep) {
        snprintf(kept_dir, kept_sz, "%s", cg_dir);
        *kept_fd = counter_fd;
    } else {
        close(counter_fd);
        for (int i = 0; i < 50 && rmdir(cg_dir) != 0 && errno == EBUSY; i++)
            msleep(20);
    }
    counter_fd = base_fd;
    snprintf(cg_dir, sizeof(cg_dir), "%s", home_dir);
}

/* --overlap-frees: the map of the previous spec, still open, with the cgroup it was
 * charged to and that cgroup's counter before it was created */
static struct {
    int fd, counter;
    char dir[512];
    long long base;
} held = {-1, -1, "", -1};

/* close the held map and wait until its freeing has shown in its own cgroup's counter */
static void release_held(void)
{
    if (held.fd < 0)
        return;
    close(held.fd);
    held.fd = -1;
    int mine = counter_fd;
    if (held.counter >= 0)
        counter_fd = held.counter;
    settle_to(held.base);
    counter_fd = mine;
    if (held.counter >= 0 && held.counter != mine && held.counter != base_fd) {
        close(held.counter);
        for (int i = 0; i < 50 && rmdir(held.dir) != 0 && errno == EBUSY; i++)
            msleep(20);
    }
    held.counter = -1;
    held.dir[0] = 0;
}

/* ---- fdinfo ---- */

static int move_self(const char *dir);

/* Read from the flush cgroup: opening /proc/self/fdinfo/N allocates a struct file, a seq_file
 * and its buffer, and the first time a proc inode and dentry, all charged to the reader's
 * memory cgroup; they are not the map's. */
static void read_fdinfo(int fd, long long *memlock, long long *max_entries)
{
    char path[64], buf[4096];
    *memlock = -1;
    *max_entries = -1;
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    int moved = flush_dir[0] && counter_fd >= 0 && move_self(flush_dir) == 0;
    int n = read_file(path, buf, sizeof(buf));
    if (moved)
        move_self(cg_dir);
    if (n < 0)
        return;
    char *p = strstr(buf, "memlock:");
    if (p)
        *memlock = strtoll(p + 8, NULL, 10);
    p = strstr(buf, "max_entries:");
    if (p)
        *max_entries = strtoll(p + 12, NULL, 10);
}

/* ---- BTF ---- */

struct btf_hdr_ {
    uint16_t magic;
    uint8_t version, flags;
    uint32_t hdr_len, type_off, type_len, str_off, str_len;
};

/* a BTF blob: int (id 1), char (id 2), char[V] (id 3), struct v { char a[V]; } (id 4) */
static int load_value_btf(unsigned value_size)
{
    static const char strs[] = "\0int\0char\0v\0a";  /* offsets: int 1, char 5, v 10, a 12 */
    uint32_t types[] = {
        1, (uint32_t)BTF_KIND_INT_ << 24, 4, (1u << 24) | 32,      /* int, signed, 32 bits */
        5, (uint32_t)BTF_KIND_INT_ << 24, 1, (1u << 24) | 8,       /* char */
        0, (uint32_t)BTF_KIND_ARRAY_ << 24, 0, 2, 1, value_size,   /* char[V] */
        10, ((uint32_t)BTF_KIND_STRUCT_ << 24) | 1, value_size, 12, 3, 0, /* struct v */
    };
    struct btf_hdr_ h = {BTF_MAGIC_, 1, 0, sizeof(struct btf_hdr_), 0, sizeof(types),
                         sizeof(types), sizeof(strs)};
    static unsigned char blob[sizeof(struct btf_hdr_) + 4 * 20 + sizeof(strs)];
    memcpy(blob, &h, sizeof(h));
    memcpy(blob + sizeof(h), types, sizeof(types));
    memcpy(blob + sizeof(h) + sizeof(types), strs, sizeof(strs));
    union bpf_attr a;
    memset(&a, 0, sizeof(a));
    a.btf = (uint64_t)(uintptr_t)blob;
    a.btf_size = sizeof(h) + sizeof(types) + sizeof(strs);
    return (int)sys_bpf(BPF_BTF_LOAD, &a, sizeof(a));
}

static unsigned char *vmlinux_btf;
static size_t vmlinux_btf_len;

static int load_vmlinux_btf(void)
{
    if (vmlinux_btf)
        return 0;
    int fd = open("/sys/kernel/btf/vmlinux", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t cap = 1 << 22, len = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0) {
            close(fd);
            free(buf);
            return -1;
        }
        if (n == 0)
            break;
        len += n;
    }
    close(fd);
    vmlinux_btf = buf;
    vmlinux_btf_len = len;
    return 0;
}

/* size of the first STRUCT/UNION called name, -1 if none, -2 if BTF is unreadable */
static long long btf_struct_size(const char *name)
{
    if (load_vmlinux_btf() != 0 || vmlinux_btf_len < sizeof(struct btf_hdr_))
        return -2;
    struct btf_hdr_ h;
    memcpy(&h, vmlinux_btf, sizeof(h));
    if (h.magic != BTF_MAGIC_)
        return -2;
    const unsigned char *types = vmlinux_btf + h.hdr_len + h.type_off;
    const char *strs = (const char *)vmlinux_btf + h.hdr_len + h.str_off;
    if (h.hdr_len + (size_t)h.str_off + h.str_len > vmlinux_btf_len ||
        h.hdr_len + (size_t)h.type_off + h.type_len > vmlinux_btf_len)
        return -2;
    size_t off = 0;
    while (off + 12 <= h.type_len) {
        uint32_t name_off, info, size;
        memcpy(&name_off, types + off, 4);
        memcpy(&info, types + off + 4, 4);
        memcpy(&size, types + off + 8, 4);
        unsigned kind = (info >> 24) & 0x1f, vlen = info & 0xffff;
        off += 12;
        if ((kind == BTF_KIND_STRUCT_ || kind == BTF_KIND_UNION_) && name_off < h.str_len &&
            !strcmp(strs + name_off, name))
            return size;
        switch (kind) {
        case 1: off += 4; break;                  /* INT */
        case 3: off += 12; break;                 /* ARRAY */
        case 4: case 5: off += 12 * vlen; break;  /* STRUCT, UNION */
        case 6: off += 8 * vlen; break;           /* ENUM */
        case 13: off += 8 * vlen; break;          /* FUNC_PROTO */
        case 14: off += 4; break;                 /* VAR */
        case 15: off += 12 * vlen; break;         /* DATASEC */
        case 17: off += 4; break;                 /* DECL_TAG */
        case 19: off += 12 * vlen; break;         /* ENUM64 */
        case 2: case 7: case 8: case 9: case 10: case 11: case 12: case 16: case 18:
            break;                                /* PTR FWD TYPEDEF VOLATILE CONST RESTRICT FUNC FLOAT TYPE_TAG */
        default:
            return -2;
        }
    }
    return -1;
}

static void json_str(char *dst, size_t sz, const char *s)
{
    size_t j = 0;
    if (sz < 3)
        return;
    dst[j++] = '"';
    for (; *s && j + 8 < sz; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            dst[j++] = '\\';
            dst[j++] = c;
        } else if (c < 0x20 || c >= 0x7f) {
            j += snprintf(dst + j, sz - j, "\\u%04x", c);
        } else {
            dst[j++] = c;
        }
    }
    dst[j++] = '"';
    dst[j] = 0;
}

static void print_sizes(const char *list)
{
    char buf[60000], name[256], q[600];
    size_t j = 0;
    int first = 1;
    j += snprintf(buf + j, sizeof(buf) - j, "{\"sizes\":{");
    const char *p = list;
    while (*p && j + 700 < sizeof(buf)) {
        size_t k = 0;
        while (*p && *p != ',' && *p != ' ' && *p != '\t' && *p != '\n' && k + 1 < sizeof(name))
            name[k++] = *p++;
        name[k] = 0;
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!k)
            continue;
        long long sz = btf_struct_size(name);
        json_str(q, sizeof(q), name);
        if (sz >= 0)
            j += snprintf(buf + j, sizeof(buf) - j, "%s%s:%lld", first ? "" : ",", q, sz);
        else
            j += snprintf(buf + j, sizeof(buf) - j, "%s%s:null", first ? "" : ",", q);
        first = 0;
    }
    snprintf(buf + j, sizeof(buf) - j, "}%s}",
             load_vmlinux_btf() == 0 ? "" : ",\"error\":\"no /sys/kernel/btf/vmlinux\"");
    emit("%s", buf);
}

/* ---- maps ---- */

struct spec {
    char id[128];
    unsigned type, key_size, value_size, max_entries;
    unsigned long long flags, extra;
    long long fills[64];
    int nfills;
};

static int parse_type(const char *s, unsigned *type)
{
    char *end;
    unsigned long v = strtoul(s, &end, 0);
    if (end != s && !*end) {
        *type = (unsigned)v;
        return 0;
    }
    for (int i = 0; i < N_TYPE_NAMES; i++)
        if (!strcasecmp(s, type_names[i])) {
            *type = i;
            return 0;
        }
    return -1;
}

static int fill_supported(unsigned t)
{
    switch (t) {
    case MT_HASH: case MT_ARRAY: case MT_PERCPU_HASH: case MT_PERCPU_ARRAY:
    case MT_LRU_HASH: case MT_LRU_PERCPU_HASH: case MT_LPM_TRIE:
    case MT_ARRAY_OF_MAPS: case MT_HASH_OF_MAPS:
    case MT_QUEUE: case MT_STACK: case MT_BLOOM_FILTER:
    case MT_DEVMAP: case MT_DEVMAP_HASH:
        return 1;
    }
    return 0;
}

static int is_percpu_value(unsigned t)
{
    return t == MT_PERCPU_HASH || t == MT_PERCPU_ARRAY || t == MT_LRU_PERCPU_HASH;
}

static int needs_btf(unsigned t)
{
    return t == MT_SK_STORAGE || t == MT_INODE_STORAGE || t == MT_TASK_STORAGE ||
           t == MT_CGRP_STORAGE;
}

static void put_le(unsigned char *dst, unsigned len, unsigned long long v)
{
    for (unsigned i = 0; i < len && i < 8; i++)
        dst[i] = (unsigned char)(v >> (8 * i));
}

static void put_be(unsigned char *dst, unsigned len, unsigned long long v)
{
    for (unsigned i = 0; i < len && i < 8; i++)
        dst[len - 1 - i] = (unsigned char)(v >> (8 * i));
}

/* how many distinct keys fit in len bytes (capped) */
static unsigned long long key_space(unsigned len)
{
    return len >= 8 ? ~0ULL : (1ULL << (8 * len));
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void run_spec(struct spec *s)
{
    long long t0 = now_ms();
    char idq[300];
    json_str(idq, sizeof(idq), s->id);

    if (s->type == MT_STRUCT_OPS) {
        emit("{\"id\":%s,\"type\":%u,\"ok\":false,\"errno\":null,\"error\":\"skipped: struct_ops\"}",
             idq, s->type);
        return;
    }

    int inner_fd = -1, btf_fd = -1;
    union bpf_attr a;
    if (s->type == MT_ARRAY_OF_MAPS || s->type == MT_HASH_OF_MAPS) {
        memset(&a, 0, sizeof(a));
        a.map_type = MT_ARRAY;
        a.key_size = 4;
        a.value_size = 4;
        a.max_entries = 1;
        inner_fd = (int)sys_bpf(BPF_MAP_CREATE, &a, sizeof(a));
        if (inner_fd < 0) {
            emit("{\"id\":%s,\"type\":%u,\"ok\":false,\"errno\":%d,\"error\":\"inner map\"}",
                 idq, s->type, errno);
            return;
        }
    }
    if (needs_btf(s->type)) {
        btf_fd = load_value_btf(s->value_size);
        if (btf_fd < 0) {
            emit("{\"id\":%s,\"type\":%u,\"ok\":false,\"errno\":%d,\"error\":\"btf load\"}",
                 idq, s->type, errno);
            if (inner_fd >= 0)
                close(inner_fd);
            return;
        }
    }

    memset(&a, 0, sizeof(a));
    a.map_type = s->type;
    a.key_size = s->key_size;
    a.value_size = s->value_size;
    a.max_entries = s->max_entries;
    a.map_flags = (uint32_t)s->flags;
    a.map_extra = s->extra;
    if (inner_fd >= 0)
        a.inner_map_fd = inner_fd;
    if (btf_fd >= 0) {
        a.btf_fd = btf_fd;
        a.btf_key_type_id = 1;
        a.btf_value_type_id = 4;
    }
    /* the fill's buffers, allocated and touched before the first reading: pages the probe
     * faults in are charged to its cgroup too */
    enum { BATCH = 1024 };
    int fdval0 = s->type == MT_ARRAY_OF_MAPS || s->type == MT_HASH_OF_MAPS;
    unsigned vlen = s->value_size;
    if (is_percpu_value(s->type))
        vlen = ((s->value_size + 7) & ~7u) * (unsigned)ncpus_possible;
    if (vlen < 8)
        vlen = 8;
    unsigned klen = s->key_size < 8 ? 8 : s->key_size;
    unsigned char *key = NULL, *val = NULL, *bkeys = NULL, *bvals = NULL;
    if (s->nfills > 0) {
        key = calloc(1, klen + 8);
        val = calloc(1, vlen + 8);
        if (fdval0) {
            bkeys = calloc(BATCH, s->key_size + 8);
            bvals = calloc(BATCH, 8);
        }
        if (key)
            memset(key, 1, klen + 8);
        if (val)
            memset(val, 1, vlen + 8);
        if (bkeys)
            memset(bkeys, 1, (size_t)BATCH * (s->key_size + 8));
        if (bvals)
            memset(bvals, 1, (size_t)BATCH * 8);
    }
    long long before = read_spec_counter(), outer0 = last_outer;
    release_held();   /* --overlap-frees: the previous map's freeing inside this window */
    int fd = (int)sys_bpf(BPF_MAP_CREATE, &a, sizeof(a));
    if (fd < 0) {
        emit("{\"id\":%s,\"type\":%u,\"ok\":false,\"errno\":%d,\"error\":\"create\"}", idq,
             s->type, errno);
        free(key);
        free(val);
        free(bkeys);
        free(bvals);
        if (inner_fd >= 0)
            close(inner_fd);
        if (btf_fd >= 0)
            close(btf_fd);
        if (inner_fd >= 0 || btf_fd >= 0)
            settle();
        return;
    }
    long long memlock, maxent;
    read_fdinfo(fd, &memlock, &maxent);
    long long after = read_spec_counter();
    char outside[32];
    fmt_outside(outside, before, outer0, after);

    char *line = line_buf;
    const size_t line_size = sizeof(line_buf);
    char num[3][32];
    size_t j = 0;
#define FMT_NUM(buf, v) (((v) < 0) ? snprintf(buf, 32, "null") : snprintf(buf, 32, "%lld", (long long)(v)))
    FMT_NUM(num[0], memlock);
    FMT_NUM(num[1], maxent);
    if (before >= 0 && after >= 0)
        snprintf(num[2], 32, "%lld", after - before);
    else
        snprintf(num[2], 32, "null");
    j += snprintf(line + j, line_size - j,
                  "{\"id\":%s,\"type\":%u,\"ok\":true,\"memlock\":%s,\"max_entries\":%s,"
                  "\"charged\":%s,\"outside\":%s,\"fills\":[",
                  idq, s->type, num[0], num[1], num[2], outside);

    const char *fill_error = NULL;
    long long retries = 0;
    int fill_batch = -1;  /* map-in-map: filled with BPF_MAP_UPDATE_BATCH (1) or not (0) */
    if (s->nfills > 0 && !fill_supported(s->type)) {
        fill_error = "unsupported";
    } else if (s->nfills > 0) {
        int keyless = s->type == MT_QUEUE || s->type == MT_STACK || s->type == MT_BLOOM_FILTER;
        int is_array = s->type == MT_ARRAY || s->type == MT_PERCPU_ARRAY ||
                       s->type == MT_ARRAY_OF_MAPS || s->type == MT_DEVMAP ||
                       s->type == MT_DEVMAP_HASH;
        int devmap = s->type == MT_DEVMAP || s->type == MT_DEVMAP_HASH;
        int fdval = s->type == MT_ARRAY_OF_MAPS || s->type == MT_HASH_OF_MAPS;
        int batch_ok = fdval, batch_tries = 0;
        if (fdval && (!bkeys || !bvals))
            batch_ok = 0;
        unsigned long long space = s->type == MT_LPM_TRIE
                                       ? (s->key_size > 4 ? key_space(s->key_size - 4) : 1)
                                       : key_space(s->key_size);
        long long n = 0;
        int stop = 0;
        for (int f = 0; f < s->nfills && !stop; f++) {
            long long target = s->fills[f];
            int err = 0;
            while (n < target) {
                if (!keyless && (unsigned long long)n >= space) {
                    err = ENOSPC;  /* ran out of distinct keys */
                    break;
                }
                if (fdval && batch_ok) {
                    /*
                     * Map-in-map updates wait for an RCU grace period each
                     * (maybe_wait_bpf_programs), BPF_MAP_UPDATE_BATCH once per batch.
                     */
                    long long chunk = target - n;
                    if (chunk > BATCH)
                        chunk = BATCH;
                    if ((unsigned long long)(n + chunk) > space)
                        chunk = (long long)(space - n);
                    for (long long b = 0; b < chunk; b++) {
                        unsigned char *k = bkeys + b * s->key_size;
                        memset(k, 0, s->key_size);
                        if (is_array) {
                            uint32_t idx = (uint32_t)(n + b);
                            memcpy(k, &idx, 4);
                        } else {
                            put_le(k, s->key_size, (unsigned long long)(n + b));
                        }
                        uint32_t v = (uint32_t)inner_fd;
                        memcpy(bvals + 4 * b, &v, 4);
                    }
                    memset(&a, 0, sizeof(a));
                    a.batch.map_fd = fd;
                    a.batch.keys = (uint64_t)(uintptr_t)bkeys;
                    a.batch.values = (uint64_t)(uintptr_t)bvals;
                    a.batch.count = (uint32_t)chunk;
                    long r = sys_bpf(BPF_MAP_UPDATE_BATCH, &a, sizeof(a));
                    if (r == 0) {
                        n += chunk;
                        continue;
                    }
                    int e = errno;
                    n += a.batch.count;  /* the elements done before the failing one */
                    if (a.batch.count > 0)
                        continue;
                    if (e == ENOMEM && batch_tries < 20) {
                        batch_tries++;
                        retries++;
                        msleep(20);
                        continue;
                    }
                    batch_ok = 0;  /* no batch support (or a real error): one by one */
                }
                memset(key, 0, klen);
                memset(val, 0, vlen);
                if (s->type == MT_LPM_TRIE) {
                    uint32_t plen = 8 * (s->key_size - 4);
                    memcpy(key, &plen, 4);
                    put_be(key + 4, s->key_size - 4, (unsigned long long)n);
                } else if (is_array) {
                    uint32_t idx = (uint32_t)n;
                    memcpy(key, &idx, 4);
                } else if (!keyless) {
                    put_le(key, s->key_size, (unsigned long long)n);
                }
                if (fdval) {
                    uint32_t v = (uint32_t)inner_fd;
                    memcpy(val, &v, 4);
                } else if (devmap) {
                    uint32_t ifindex = 1;  /* lo: every network namespace has it */
                    memcpy(val, &ifindex, 4);
                } else {
                    put_le(val, s->value_size < 8 ? s->value_size : 8, (unsigned long long)n + 1);
                }
                memset(&a, 0, sizeof(a));
                a.map_fd = fd;
                a.key = keyless ? 0 : (uint64_t)(uintptr_t)key;
                a.value = (uint64_t)(uintptr_t)val;
                a.flags = BPF_ANY;
                int tries = 0;
                long r;
                for (;;) {
                    r = sys_bpf(BPF_MAP_UPDATE_ELEM, &a, sizeof(a));
                    if (r == 0 || errno != ENOMEM || tries >= 20)
                        break;
                    tries++;
                    retries++;
                    msleep(20);
                }
                if (r != 0) {
                    err = errno;
                    break;
                }
                n++;
            }
            long long ml, me;
            read_fdinfo(fd, &ml, &me);
            long long c = read_spec_counter();
            fmt_outside(outside, before, outer0, c);
            FMT_NUM(num[0], ml);
            if (before >= 0 && c >= 0)
                snprintf(num[2], 32, "%lld", c - before);
            else
                snprintf(num[2], 32, "null");
            j += snprintf(line + j, line_size - j,
                          "%s{\"n\":%lld,\"inserted\":%lld,\"memlock\":%s,\"charged\":%s,"
                          "\"outside\":%s,\"errno\":%d}",
                          f ? "," : "", target, n, num[0], num[2], outside, err);
            if (err) {
                stop = 1;
                fill_error = "insert failed";
            }
            if (j + 300 > line_size)
                stop = 1;
        }
        if (fdval)
            fill_batch = batch_ok;
    }
    free(key);
    free(val);
    free(bkeys);
    free(bvals);
    if (fill_error)
        j += snprintf(line + j, line_size - j, "],\"fill_error\":\"%s\"", fill_error);
    else
        j += snprintf(line + j, line_size - j, "],\"fill_error\":null");
    if (overlap_frees && !quiet) {
        held.fd = fd;
        held.base = before;
    } else {
        close(fd);
    }
    if (inner_fd >= 0)
        close(inner_fd);
    if (btf_fd >= 0)
        close(btf_fd);
    if (held.fd != fd)
        settle_to(before);
    if (fill_batch >= 0)
        j += snprintf(line + j, line_size - j, ",\"fill_batch\":%s",
                      fill_batch ? "true" : "false");
    snprintf(line + j, line_size - j, ",\"fill_enomem_retries\":%lld,\"ms\":%lld}",
             retries, now_ms() - t0);
    emit("%s", line);
}

static int parse_spec_line(char *line, struct spec *s, char *err, size_t errsz)
{
    char *tok[8], *save = NULL;
    int nt = 0;
    for (char *t = strtok_r(line, " \t\r\n", &save); t && nt < 8;
         t = strtok_r(NULL, " \t\r\n", &save))
        tok[nt++] = t;
    if (nt != 8 || strtok_r(NULL, " \t\r\n", &save)) {
        snprintf(err, errsz, "expected 8 fields");
        return -1;
    }
    memset(s, 0, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", tok[0]);
    if (parse_type(tok[1], &s->type) != 0) {
        snprintf(err, errsz, "unknown map type");
        return -1;
    }
    char *end;
    unsigned long long v[5];
    for (int i = 0; i < 5; i++) {
        errno = 0;
        v[i] = strtoull(tok[2 + i], &end, 0);
        if (*end || end == tok[2 + i] || errno) {
            snprintf(err, errsz, "bad number in field %d", 3 + i);
            return -1;
        }
    }
    s->key_size = (unsigned)v[0];
    s->value_size = (unsigned)v[1];
    s->max_entries = (unsigned)v[2];
    s->flags = v[3];
    s->extra = v[4];
    if (strcmp(tok[7], "-") != 0) {
        char *save2 = NULL;
        for (char *t = strtok_r(tok[7], ",", &save2); t; t = strtok_r(NULL, ",", &save2)) {
            if (s->nfills >= 64) {
                snprintf(err, errsz, "too many fill levels");
                return -1;
            }
            long long n = strtoll(t, &end, 0);
            if (*end || end == t || n < 0) {
                snprintf(err, errsz, "bad fill count");
                return -1;
            }
            s->fills[s->nfills++] = n;
        }
    }
    return 0;
}

/* ---- programs: what a load charges, and its peak ---- */

static void run_prog(const char *id, long n)
{
    char q[300];
    json_str(q, sizeof(q), id);
    if (n < 2 || n > 1000000) {
        emit("{\"id\":%s,\"prog\":true,\"insns\":%ld,\"ok\":false,\"errno\":22}", q, n);
        return;
    }
    struct bpf_insn *insns = calloc((size_t)n, sizeof(*insns));
    if (!insns)
        return;
    insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;        /* r0 = 0 */
    for (long i = 1; i < n - 1; i++)
        insns[i].code = BPF_ALU64 | BPF_ADD | BPF_K, insns[i].imm = 1;   /* r0 += 1 */
    insns[n - 1].code = BPF_JMP | BPF_EXIT;
    static const char license[] = "GPL";
    /* the sampler: a child reading the raw counter until told to stop */
    volatile long long *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t sampler = -1;
    if (shared != MAP_FAILED && counter_fd >= 0) {
        shared[0] = 0;    /* 1: sampling, 2: stop */
        shared[1] = -1;   /* max reading */
        sampler = fork();
        if (sampler == 0) {
            if (ncpus_online > 1)
                pin_cpu(1);
            char buf[64];
            shared[0] = 1;
            while (shared[0] == 1) {
                ssize_t k = pread(counter_fd, buf, sizeof(buf) - 1, 0);
                if (k > 0) {
                    buf[k] = 0;
                    long long v = strtoll(buf, NULL, 10);
                    if (v > shared[1])
                        shared[1] = v;
                }
            }
            while (shared[0] != 3)     /* stay (its kernel memory charged) until read */
                msleep(1);
            _exit(0);
        }
        while (sampler > 0 && shared[0] != 1)
            msleep(1);
    }
    char path[700];
    int peak_ok = 0;
    if (!strcmp(cg_kind, "v1")) {
        snprintf(path, sizeof(path), "%s/memory.kmem.max_usage_in_bytes", cg_dir);
        peak_ok = write_file(path, "0") == 0;
    }
    long long before = read_counter();
    if (sampler > 0)
        shared[1] = -1;
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
    attr.insn_cnt = (unsigned)n;
    attr.insns = (unsigned long)insns;
    attr.license = (unsigned long)license;
    int fd = (int)sys_bpf(BPF_PROG_LOAD, &attr, sizeof(attr));
    int err = fd < 0 ? errno : 0;
    long long sampled = -1;
    if (sampler > 0) {
        shared[0] = 2;
        msleep(2);
        sampled = shared[1];
    }
    long long peak = -1;
    if (peak_ok) {
        char buf[64];
        if (read_file(path, buf, sizeof(buf)) > 0)
            peak = strtoll(buf, NULL, 10);
    }
    long long after = read_counter();
    if (sampler > 0) {
        shared[0] = 3;
        waitpid(sampler, NULL, 0);
    }
    if (fd < 0) {
        emit("{\"id\":%s,\"prog\":true,\"insns\":%ld,\"ok\":false,\"errno\":%d}", q, n, err);
    } else {
        long long memlock, unused;
        read_fdinfo(fd, &memlock, &unused);
        char c[32] = "null", ps[32] = "null", pk[32] = "null", ml[32] = "null";
        if (before >= 0 && after >= 0)
            snprintf(c, sizeof(c), "%lld", after - before);
        if (before >= 0 && sampled >= 0)
            snprintf(ps, sizeof(ps), "%lld", sampled - before);
        if (before >= 0 && peak >= 0)
            snprintf(pk, sizeof(pk), "%lld", peak - before);
        if (memlock >= 0)
            snprintf(ml, sizeof(ml), "%lld", memlock);
        emit("{\"id\":%s,\"prog\":true,\"insns\":%ld,\"ok\":true,\"errno\":0,"
             "\"memlock\":%s,\"charged\":%s,\"peak_sampled\":%s,\"peak\":%s}",
             q, n, ml, c, ps, pk);
        close(fd);
        settle_to(before);
    }
    if (shared != MAP_FAILED)
        munmap((void *)shared, 4096);
    free(insns);
}

/* `progs OBJ`: the program probe on OBJ, its lines tagged with the object, through emit */
static void run_progprobe(const char *obj)
{
    char q[1100];
    json_str(q, sizeof(q), obj);
    if (!flush_dir[0] || counter_fd < 0) {
        emit("{\"progs_error\":\"no memory cgroup\",\"obj\":%s,\"errno\":0}", q);
        return;
    }
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        emit("{\"progs_error\":\"pipe\",\"obj\":%s,\"errno\":%d}", q, errno);
        return;
    }
    fflush(out);
    pid_t pid = fork();
    if (pid < 0) {
        emit("{\"progs_error\":\"fork\",\"obj\":%s,\"errno\":%d}", q, errno);
        close(pipefd[0]);
        close(pipefd[1]);
        return;
    }
    if (pid == 0) {
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        close(pipefd[1]);
        char *argv[] = {"/progprobe", (char *)obj, (char *)(strcmp(cg_kind, "v1") ? "--cgroup-v2"
                                                             : "--cgroup-v1"),
                        cg_base, "--flush-cgroup", flush_dir, NULL};
        execv("/progprobe", argv);
        _exit(127);
    }
    close(pipefd[1]);
    FILE *in = fdopen(pipefd[0], "r");
    char line[8192];
    while (in && fgets(line, sizeof(line), in)) {
        line[strcspn(line, "\r\n")] = 0;
        size_t n = strlen(line);
        if (n >= 2 && line[0] == '{' && line[n - 1] == '}') {
            line[n - 1] = 0;
            emit("%s,\"obj\":%s}", line, q);
        }
    }
    if (in)
        fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        emit("{\"progs_error\":\"the program probe failed\",\"obj\":%s,\"errno\":%d}", q,
             WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    /* back in the measured cgroup (the child moved, we never did), pinned as before */
    pin_cpu(0);
    settle();
}

static void run_specs(FILE *f)
{
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#' || *p == '\n' || *p == '\r')
            continue;
        if (!strncmp(p, "sizes", 5) && (p[5] == ' ' || p[5] == '\t')) {
            print_sizes(p + 6);
            continue;
        }
        if (!strncmp(p, "progs", 5) && (p[5] == ' ' || p[5] == '\t')) {
            char obj[1024];
            if (sscanf(p + 6, "%1023s", obj) == 1)
                run_progprobe(obj);
            else
                emit("{\"spec_error\":\"expected: progs OBJ\",\"line\":%d}", lineno);
            continue;
        }
        if (!strncmp(p, "prog", 4) && (p[4] == ' ' || p[4] == '\t')) {
            char pid_[128];
            long n = 0;
            if (sscanf(p + 5, "%127s %ld", pid_, &n) == 2) {
                enter_spec_cgroup();
                run_prog(pid_, n);
                leave_spec_cgroup(0, NULL, 0, NULL);
            } else
                emit("{\"spec_error\":\"expected: prog ID N\",\"line\":%d}", lineno);
            continue;
        }
        struct spec s;
        char err[128], copy[4096];
        snprintf(copy, sizeof(copy), "%s", p);
        if (parse_spec_line(p, &s, err, sizeof(err)) != 0) {
            char q[4400];
            copy[strcspn(copy, "\r\n")] = 0;
            json_str(q, sizeof(q), copy);
            emit("{\"spec_error\":\"%s\",\"line\":%d,\"text\":%s}", err, lineno, q);
            continue;
        }
        enter_spec_cgroup();
        run_spec(&s);
        if (held.fd >= 0 && held.counter < 0) {
            held.counter = counter_fd;
            leave_spec_cgroup(1, held.dir, sizeof(held.dir), &held.counter);
        } else {
            leave_spec_cgroup(0, NULL, 0, NULL);
        }
    }
    release_held();
}

static void emit_header(void)
{
    struct utsname u;
    char rel[300] = "\"?\"", ctr[128] = "null";
    if (uname(&u) == 0)
        json_str(rel, sizeof(rel), u.release);
    if (counter_fd >= 0)
        json_str(ctr, sizeof(ctr), cg_counter);
    char mach[100] = "\"?\"";
    if (uname(&u) == 0)
        json_str(mach, sizeof(mach), u.machine);
    char kmax[32] = "";
    long nr_cpus = -1;
    if (read_file("/sys/devices/system/cpu/kernel_max", kmax, sizeof(kmax)) > 0)
        nr_cpus = strtol(kmax, NULL, 10) + 1;
    emit("{\"probe\":\"bpfmem\",\"kernel\":%s,\"machine\":%s,\"nr_cpus\":%ld,"
         "\"possible_cpus\":%d,\"online_cpus\":%d,"
         "\"page_size\":%ld,\"cgroup\":\"%s\",\"counter\":%s,\"flush\":%s,\"pid1\":%s,"
         "\"spec_cgroups\":%s,\"thp_enabled\":%s}",
         rel, mach, nr_cpus, ncpus_possible, ncpus_online, sysconf(_SC_PAGESIZE),
         counter_fd >= 0 ? cg_kind : "none", ctr, flush_dir[0] ? "true" : "false",
         is_pid1 ? "true" : "false", counter_fd >= 0 && !one_cgroup ? "true" : "false",
         thp_enabled < 0 ? "null" : thp_enabled ? "true" : "false");
}

/*
 * One-time costs (the first map, file and bpf_mem_alloc cache of this cgroup, the probe's
 * own first-use pages, the stocks' start-up contents) should not land in the first spec:
 * run a few small specs through the same code path first, without output.
 */
/* the probe's own pages (the output line, emit's stack buffer) faulted in once, up front */
static void touch_own_pages(void)
{
    volatile char stack[200000];
    for (size_t i = 0; i < sizeof(stack); i += 512)
        stack[i] = 1;
    memset(line_buf, 1, sizeof(line_buf));
}

static void warm_up(void)
{
    touch_own_pages();
    static const char *warm[] = {
        "warm-array 2 4 8 1000 0 0 -",
        "warm-hash 1 4 8 64 0 0 0,16",
        "warm-hash-np 1 4 8 64 1 0 0,16",
        "warm-pcpu-hash-np 5 4 8 64 1 0 0,16",
        "warm-queue 22 0 8 16 0 0 16",
        "warm-array 2 4 8 1000 0 0 -",
    };
    quiet = 1;
    for (unsigned i = 0; i < sizeof(warm) / sizeof(warm[0]); i++) {
        char line[128], err[128];
        struct spec sp;
        snprintf(line, sizeof(line), "%s", warm[i]);
        if (parse_spec_line(line, &sp, err, sizeof(err)) == 0) {
            enter_spec_cgroup();
            run_spec(&sp);
            leave_spec_cgroup(0, NULL, 0, NULL);
        }
    }
    quiet = 0;
    settle();
}

static void read_cpu_counts(void)
{
    char buf[256];
    if (read_file("/sys/devices/system/cpu/possible", buf, sizeof(buf)) > 0)
        ncpus_possible = count_cpu_list(buf);
    if (read_file("/sys/devices/system/cpu/online", buf, sizeof(buf)) > 0)
        ncpus_online = count_cpu_list(buf);
}

static void pid1_setup(void)
{
    mkdir("/proc", 0555);
    mkdir("/sys", 0555);
    mkdir("/dev", 0755);
    mount("proc", "/proc", "proc", 0, NULL);
    mount("sysfs", "/sys", "sysfs", 0, NULL);
    mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
    int cfd = open("/dev/console", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (cfd >= 0) {
        out = fdopen(cfd, "w");
        dup2(cfd, 2);
    }
    if (!out)
        out = stdout;
    if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, NULL) != 0) {
        fprintf(stderr, "probe: mount cgroup2: %s\n", strerror(errno));
        return;
    }
    if (write_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory") != 0) {
        fprintf(stderr, "probe: enable +memory: %s\n", strerror(errno));
        return;
    }
    mkdir("/sys/fs/cgroup/bpfmem-probe", 0755);
    mkdir("/sys/fs/cgroup/bpfmem-flush", 0755);
    cg_kind = "v2";
    snprintf(flush_dir, sizeof(flush_dir), "/sys/fs/cgroup/bpfmem-flush");
    if (setup_cgroup("v2", "/sys/fs/cgroup/bpfmem-probe") != 0) {
        flush_dir[0] = 0;
        cg_kind = "none";
    }
}

static void usage(void)
{
    fprintf(stderr,
            "usage: probe SPECFILE [--cgroup-v1 DIR | --cgroup-v2 DIR | --no-cgroup] "
            "[--flush-cgroup DIR] [--one-cgroup] [--overlap-frees]\n       probe --btf-sizes NAME,NAME,...\n");
}

int main(int argc, char **argv)
{
    out = stdout;
    is_pid1 = getpid() == 1;
    const char *specfile = NULL, *cg_v1 = NULL, *cg_v2 = NULL, *flush = NULL, *sizes = NULL;

    if (is_pid1) {
        /* the kernel passes what follows "--" on its command line to init */
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--one-cgroup"))
                one_cgroup = 1;
            else if (!strcmp(argv[i], "--overlap-frees"))
                overlap_frees = 1;
        }
        pid1_setup();
        thp_enabled = no_huge_pages();  /* (after pid1_setup: /proc mounted) */
        specfile = "/specs.txt";
    } else {
        thp_enabled = no_huge_pages();
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--cgroup-v1") && i + 1 < argc)
                cg_v1 = argv[++i];
            else if (!strcmp(argv[i], "--cgroup-v2") && i + 1 < argc)
                cg_v2 = argv[++i];
            else if (!strcmp(argv[i], "--flush-cgroup") && i + 1 < argc)
                flush = argv[++i];
            else if (!strcmp(argv[i], "--btf-sizes") && i + 1 < argc)
                sizes = argv[++i];
            else if (!strcmp(argv[i], "--no-cgroup"))
                ;
            else if (!strcmp(argv[i], "--one-cgroup"))
                one_cgroup = 1;
            else if (!strcmp(argv[i], "--overlap-frees"))
                overlap_frees = 1;
            else if (argv[i][0] != '-' && !specfile)
                specfile = argv[i];
            else {
                usage();
                return 2;
            }
        }
        if (sizes) {
            print_sizes(sizes);
            return load_vmlinux_btf() == 0 ? 0 : 1;
        }
        if (!specfile) {
            usage();
            return 2;
        }
    }
    read_cpu_counts();
    pin_cpu(0);

    if (!is_pid1 && (cg_v1 || cg_v2)) {
        if (flush)
            snprintf(flush_dir, sizeof(flush_dir), "%s", flush);
        if (setup_cgroup(cg_v1 ? "v1" : "v2", cg_v1 ? cg_v1 : cg_v2) != 0)
            return 3;
    }

    /* <= 5.10 charges maps to RLIMIT_MEMLOCK (64 KiB by default there) */
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_MEMLOCK, &rl);

    FILE *f = fopen(specfile, "r");
    warm_up();
    emit_header();
    if (!f) {
        emit("{\"error\":\"cannot open spec file\",\"errno\":%d}", errno);
    } else {
        /* the first line of output and the first read of the spec file cost pages too */
        char first[4096];
        if (fgets(first, sizeof(first), f))
            rewind(f);
        settle();
        run_specs(f);
        fclose(f);
    }
    emit("{\"done\":true}");

    if (is_pid1) {
        fflush(out);
        sync();
        sleep(1);
        reboot(RB_POWER_OFF);
        for (;;)
            pause();
    }
    return 0;
}
