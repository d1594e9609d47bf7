/* SPDX-License-Identifier: MIT */
/*
 * cgcounter.h - the memory cgroup counter both probes read (probe.c: maps, progprobe.c:
 * programs), included by each: the cgroup state, moving the probe between the measured
 * cgroup and its flush sibling, the per-CPU stock flush, and stable readings.
 *
 * A reading of the counter (v1 memory.kmem.usage_in_bytes, v2 memory.current) is taken after
 * a stock flush: the probe moves to the flush sibling, charges a slab object and an anon page
 * on every online CPU there and moves back, which drains the per-CPU memcg stocks holding the
 * measured cgroup's charges.
 */
#ifndef BPFMEM_CGCOUNTER_H
#define BPFMEM_CGCOUNTER_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

static int ncpus_online = 1;
static char cg_dir[512];     /* measured cgroup */
static char flush_dir[512];  /* sibling for stock flushing ("" = none) */
static const char *cg_kind = "none";   /* "v1", "v2" or "none" */
static int counter_fd = -1;  /* the counter file of cg_dir, -1: none */

static int write_file(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, s, strlen(s));
    int e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* a small file whole, NUL-terminated: its length, -1 on error */
static int read_file(const char *path, char *buf, size_t sz)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sz - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return (int)n;
}

static void pin_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
}

static int move_self(const char *dir)
{
    char path[600], pid[32];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    if (!strcmp(cg_kind, "v1")) {
        snprintf(path, sizeof(path), "%s/tasks", dir);
        if (write_file(path, pid) == 0)
            return 0;
    }
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    return write_file(path, pid);
}

static void flush_stocks(void)
{
    if (!flush_dir[0] || counter_fd < 0)
        return;
    if (move_self(flush_dir) != 0)
        return;
    long page = sysconf(_SC_PAGESIZE);
    for (int cpu = 0; cpu < ncpus_online; cpu++) {
        pin_cpu(cpu);
        /* a slab object (struct file, SLAB_ACCOUNT) and an anon page charged to the sibling */
        int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            p[0] = 1;
            munmap(p, page);
        }
        if (fd >= 0)
            close(fd);
    }
    move_self(cg_dir);
    pin_cpu(0);
}

/*
 * No transparent huge pages for the probe (PR_SET_THP_DISABLE, inherited by children and
 * kept across exec). With THP "always" (Debian's kernels) the probe's own memory, its vmlinux
 * BTF buffer above all (4 MiB; 8 MiB on arm64's 6.1, whose BTF is larger), becomes 2 MiB
 * pages, and one that khugepaged collapses late is charged to the cgroup the probe is in by
 * then (a spec's) while the small pages it replaces were charged where they were faulted.
 * Seen on arm64's 6.1: a per-CPU array's create read 4 MiB above its usual 16 KiB, once in
 * a few sweeps, and the probe without this ended a run with 4096 kB of AnonHugePages.
 * Returns the kernel's word for it, /proc/self/status THP_enabled (0: disabled, 1: not,
 * -1: unknown: no /proc, or before 5.0).
 */
static int no_huge_pages(void)
{
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    char buf[4096];
    if (read_file("/proc/self/status", buf, sizeof(buf)) <= 0)
        return -1;
    char *at = strstr(buf, "\nTHP_enabled:");
    return at ? (int)strtol(at + 13, NULL, 10) : -1;
}

static long long read_counter_once(void)
{
    char buf[64];
    flush_stocks();
    ssize_t n = pread(counter_fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    return strtoll(buf, NULL, 10);
}

static void msleep(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* synchronize_rcu(), so that RCU-deferred frees (files, map memory) get going */
static void rcu_sync(void)
{
#ifdef __NR_membarrier
    syscall(__NR_membarrier, 1 /* MEMBARRIER_CMD_GLOBAL */, 0);
#endif
}

/*
 * The counter in bytes (-1 without a counter), once `stable` consecutive readings 2 ms
 * apart agree (deferred work such as bpf_mem_alloc refills or map frees has then finished),
 * at most `tries` readings.
 */
static long long read_counter_stable(int stable, int tries, long ms)
{
    if (counter_fd < 0)
        return -1;
    long long prev = read_counter_once();
    int same = 1;
    for (int i = 0; i < tries && same < stable; i++) {
        msleep(ms);
        long long c = read_counter_once();
        if (c == prev) {
            same++;
        } else {
            same = 1;
            prev = c;
        }
    }
    return prev;
}

static long long read_counter(void)
{
    return read_counter_stable(2, 50, 2);
}

#endif
