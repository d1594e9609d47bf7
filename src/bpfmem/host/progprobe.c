// SPDX-License-Identifier: MIT
/*
 * progprobe - load the programs of a BPF object for real with the system libbpf and print
 * what the kernel charged for them (bpfmem measure --programs).
 *
 * Build:  gcc -O2 -Wall -o progprobe progprobe.c -lbpf       (Debian: libbpf-dev)
 * Usage:  progprobe OBJ --cgroup-v1 DIR|--cgroup-v2 DIR --flush-cgroup DIR
 *
 * The probe moves itself into DIR, pins itself to CPU 0 and reads the cgroup's kernel-memory
 * counter (v1 memory.kmem.usage_in_bytes, v2 memory.current) after a stock flush (it moves
 * to the flush sibling, charges a slab object and an anon page on every online CPU there and
 * moves back: that drains the per-CPU memcg stocks holding the measured cgroup's charges).
 *
 * Phases, each on a fresh bpf_object (pin paths cleared, nothing is ever pinned):
 *   "maps": every program's autoload off: what the maps (and the object's BTF) cost;
 *   "all":  autoload as libbpf set it: the object as an agent loads it; peak of the load;
 *   "prog": one line per program, loaded alone (autoload on for it only); its charge is the
 *           phase's charge minus the "maps" phase's.
 * Before each load the cgroup's v1 watermarks are reset (memory.kmem.max_usage_in_bytes and
 * memory.max_usage_in_bytes), so "peak" is the highest kernel charge during the load, above
 * the reading taken just before it; null on v2 (see main).
 *
 * Each load is read in a fresh child cgroup of DIR ("phase_cgroups":true in the header).
 *
 * Output: JSON Lines on stdout, one per phase, then {"kind":"done"}:
 *   {"kind":"phase","phase":"maps"|"all","ok":bool,"errno":N,"charged":B,"peak":B|null,
 *    "peak_total":B|null}
 *   {"kind":"prog","name":S,"section":S,"loaded":true,"id":N,"type":N,"memlock":B,
 *    "jited_prog_len":B,"xlated_prog_len":B,"insn_cnt":N,"btf_id":N,"nr_map_ids":N,
 *    "nr_func_info":N,"nr_line_info":N,"nr_jited_ksyms":N,"verified_insns":N,
 *    "charged":B,"end":B,"peak":B|null}
 *   {"kind":"prog","name":S,"section":S,"loaded":false,"errno":N,"reason":S}
 * "insn_cnt" is bpf_program__insn_cnt after the load: the instructions libbpf handed to the
 * kernel, after its relocations. Charges are bytes; -1 or null where the kernel has no figure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cgcounter.h"

/* cg_dir, flush_dir, cg_kind, counter_fd, ncpus_online and the counter's readings: cgcounter.h */
static char peak_file[64], peak_total_file[64];

static char log_text[1 << 16];   /* libbpf's warnings of the last load (the verifier log) */
static size_t log_len;

static int print_cb(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level != LIBBPF_WARN || log_len >= sizeof(log_text) - 1)
		return 0;
	int n = vsnprintf(log_text + log_len, sizeof(log_text) - log_len, fmt, ap);
	if (n > 0)
		log_len += (size_t)n < sizeof(log_text) - log_len ? (size_t)n
								    : sizeof(log_text) - log_len - 1;
	return 0;
}

static long long read_number(const char *dir, const char *name)
{
	char path[700], buf[64];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	return strtoll(buf, NULL, 10);
}

/* after closing an object: wait for its RCU-deferred frees (programs, maps) to show */
static void settle(void)
{
	rcu_sync();
	read_counter_stable(3, 100, 10);
	rcu_sync();
	read_counter_stable(3, 100, 10);
}

static void reset_peaks(void)
{
	char path[700];
	if (peak_file[0]) {
		snprintf(path, sizeof(path), "%s/%s", cg_dir, peak_file);
		write_file(path, "0");
	}
	if (peak_total_file[0]) {
		snprintf(path, sizeof(path), "%s/%s", cg_dir, peak_total_file);
		write_file(path, "0");
	}
}

/*
 * Each load is measured in a cgroup of its own, a fresh child of the cgroup given: a charge
 * stays with the memory cgroup it was made in, so the deferred freeing of an earlier phase's
 * object (RCU callbacks, a kworker's vfree) uncharges that phase's cgroup and never lands
 * between this load's readings (in one shared cgroup, Debian's 6.1 under qemu read a maps
 * phase below 0 and a program 24 pages over its memlock). On v2 the probe waits in the
 * flush sibling between loads: a cgroup that hands the memory controller to its children
 * holds no process.
 */
static char cg_base[512], home_dir[512], counter_name[40];
static int base_fd = -1, per_phase;
static unsigned phase_seq;

static void setup_phases(void)
{
	snprintf(cg_base, sizeof(cg_base), "%s", cg_dir);
	snprintf(home_dir, sizeof(home_dir), "%s", cg_dir);
	base_fd = counter_fd;
	if (!strcmp(cg_kind, "v2")) {
		if (!per_phase)
			return;          /* one cgroup: the controller could not be handed down */
		snprintf(home_dir, sizeof(home_dir), "%s", flush_dir);
		snprintf(cg_dir, sizeof(cg_dir), "%s", home_dir);
	}
	per_phase = 1;
}

static void enter_phase(void)
{
	char dir[sizeof(cg_dir)], path[700];
	if (!per_phase)
		return;
	if ((size_t)snprintf(dir, sizeof(dir), "%.480s/p%u", cg_base, ++phase_seq) >= sizeof(dir))
		return;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, counter_name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || move_self(dir) != 0) {
		if (fd >= 0)
			close(fd);
		rmdir(dir);
		return;
	}
	snprintf(cg_dir, sizeof(cg_dir), "%s", dir);
	counter_fd = fd;
}

/* back home after the readings; the child goes (what stays charged to it, the loaded
 * object until it is closed, goes to the parent) */
static void leave_phase(void)
{
	if (!per_phase || counter_fd == base_fd)
		return;
	move_self(home_dir);
	close(counter_fd);
	for (int i = 0; i < 50 && rmdir(cg_dir) != 0 && errno == EBUSY; i++)
		msleep(20);
	counter_fd = base_fd;
	snprintf(cg_dir, sizeof(cg_dir), "%s", home_dir);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20 || c >= 0x7f)
			fputc('?', f);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_num(const char *key, long long v)
{
	if (v < 0)
		printf(",\"%s\":null", key);
	else
		printf(",\"%s\":%lld", key, v);
}

static long long fdinfo_memlock(int fd)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	move_self(flush_dir);   /* the fdinfo file's own slab objects are not the program's */
	int f = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = f < 0 ? -1 : read(f, buf, sizeof(buf) - 1);
	if (f >= 0)
		close(f);
	move_self(cg_dir);
	pin_cpu(0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strstr(buf, "memlock:");
	return p ? strtoll(p + 8, NULL, 10) : -1;
}

/* the last lines of the verifier log libbpf printed (or its last warning) */
static const char *reason(void)
{
	static char tail[2048];
	char *end = strstr(log_text, "-- END PROG LOAD LOG --");
	size_t len = end ? (size_t)(end - log_text) : log_len;
	while (len && (log_text[len - 1] == '\n' || log_text[len - 1] == ' '))
		len--;
	size_t start = len;
	int lines = 0;
	while (start && lines < 4) {
		start--;
		if (log_text[start] == '\n')
			lines++;
	}
	if (log_text[start] == '\n')
		start++;
	size_t n = len - start < sizeof(tail) - 1 ? len - start : sizeof(tail) - 1;
	memcpy(tail, log_text + start, n);
	tail[n] = 0;
	return tail;
}

static struct bpf_object *open_obj(const char *path, int only, int *nprogs)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	if (!obj || libbpf_get_error(obj))
		return NULL;
	struct bpf_map *m;
	bpf_object__for_each_map(m, obj)
		bpf_map__set_pin_path(m, NULL);
	struct bpf_program *p;
	int i = 0;
	bpf_object__for_each_program(p, obj) {
		if (only == -2)
			bpf_program__set_autoload(p, false);
		else if (only >= 0)
			bpf_program__set_autoload(p, i == only);
		i++;
	}
	*nprogs = i;
	return obj;
}

struct load {
	int err;
	long long charged, peak, peak_total;
};

static struct load load_obj(struct bpf_object *obj)
{
	struct load r;
	log_len = 0;
	log_text[0] = 0;
	enter_phase();
	long long before = read_counter();
	long long before_total = peak_total_file[0] ? read_number(cg_dir, "memory.usage_in_bytes") : -1;
	reset_peaks();
	r.err = bpf_object__load(obj);
	long long peak = peak_file[0] ? read_number(cg_dir, peak_file) : -1;
	long long peak_total = peak_total_file[0] ? read_number(cg_dir, peak_total_file) : -1;
	/* libbpf's feature probes load and close programs and maps: their frees are deferred
	 * (RCU); wait for them before the reading that stays */
	settle();
	long long after = read_counter();
	r.charged = after - before;
	r.peak = peak < 0 ? -1 : peak - before;
	r.peak_total = peak_total < 0 || before_total < 0 ? -1 : peak_total - before_total;
	leave_phase();
	return r;
}

static void print_prog(struct bpf_program *p, const struct load *l, long long maps_charged)
{
	printf("{\"kind\":\"prog\",\"name\":");
	json_str(stdout, bpf_program__name(p));
	printf(",\"section\":");
	json_str(stdout, bpf_program__section_name(p));
	int fd = bpf_program__fd(p);
	if (fd < 0) {
		printf(",\"loaded\":false,\"errno\":%d,\"reason\":", l->err < 0 ? -l->err : 0);
		json_str(stdout, reason());
		printf("}\n");
		fflush(stdout);
		return;
	}
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	memset(&info, 0, sizeof(info));
	bpf_obj_get_info_by_fd(fd, &info, &len);
	printf(",\"loaded\":true,\"id\":%u,\"type\":%u", info.id, info.type);
	json_num("memlock", fdinfo_memlock(fd));
	printf(",\"jited_prog_len\":%u,\"xlated_prog_len\":%u,\"insn_cnt\":%zu,\"btf_id\":%u,"
	       "\"nr_map_ids\":%u,\"nr_func_info\":%u,\"nr_line_info\":%u,\"nr_jited_ksyms\":%u,"
	       "\"verified_insns\":%u",
	       info.jited_prog_len, info.xlated_prog_len, bpf_program__insn_cnt(p), info.btf_id,
	       info.nr_map_ids, info.nr_func_info, info.nr_line_info, info.nr_jited_ksyms,
	       info.verified_insns);
	json_num("end", l->charged);
	if (maps_charged < 0 || l->charged < 0)
		printf(",\"charged\":null");
	else   /* a difference: may be below 0 by a page of noise */
		printf(",\"charged\":%lld", l->charged - maps_charged);
	json_num("peak", l->peak);
	printf("}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *obj_path = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cgroup-v1") && i + 1 < argc) {
			cg_kind = "v1";
			snprintf(cg_dir, sizeof(cg_dir), "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--cgroup-v2") && i + 1 < argc) {
			cg_kind = "v2";
			snprintf(cg_dir, sizeof(cg_dir), "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--flush-cgroup") && i + 1 < argc) {
			snprintf(flush_dir, sizeof(flush_dir), "%s", argv[++i]);
		} else if (!obj_path) {
			obj_path = argv[i];
		} else {
			obj_path = NULL;
			break;
		}
	}
	if (!obj_path || !cg_dir[0] || !flush_dir[0]) {
		fprintf(stderr, "usage: progprobe OBJ --cgroup-v1 DIR|--cgroup-v2 DIR "
				"--flush-cgroup DIR\n");
		return 2;
	}
	libbpf_set_print(print_cb);
	int thp = no_huge_pages();	/* (cgcounter.h: khugepaged's charges are not the object's) */
	struct rlimit inf = {RLIM_INFINITY, RLIM_INFINITY};
	setrlimit(RLIMIT_MEMLOCK, &inf);
	ncpus_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
	char sub[700];
	snprintf(sub, sizeof(sub), "%s/cgroup.subtree_control", cg_dir);
	if (!strcmp(cg_kind, "v2") && flush_dir[0] && move_self(flush_dir) == 0 &&
	    write_file(sub, "+memory") == 0) {
		per_phase = 1;   /* v2: the loads in children of DIR, the probe in the sibling */
	} else if (move_self(cg_dir) != 0) {
		fprintf(stderr, "progprobe: cannot move into %s: %s\n", cg_dir, strerror(errno));
		return 3;
	}
	const char *counter = strcmp(cg_kind, "v1") ? "memory.current" : "memory.kmem.usage_in_bytes";
	snprintf(counter_name, sizeof(counter_name), "%s", counter);
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", cg_dir, counter);
	counter_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (counter_fd < 0) {
		fprintf(stderr, "progprobe: cannot open %s: %s\n", path, strerror(errno));
		return 3;
	}
	setup_phases();
	if (!strcmp(cg_kind, "v1")) {
		strcpy(peak_file, "memory.kmem.max_usage_in_bytes");
		strcpy(peak_total_file, "memory.max_usage_in_bytes");
	}
	/* v2: memory.peak resets only for the fd that wrote to it (6.12+), and holding that fd
	 * open charges its seq_file buffer into the phase being measured; no peak there (null)
	 * rather than the cgroup's lifetime peak */
	pin_cpu(0);
	printf("{\"kind\":\"header\",\"cgroup\":\"%s\",\"counter\":\"%s\",\"peak\":", cg_kind,
	       counter);
	if (peak_file[0])
		json_str(stdout, peak_file);
	else
		printf("null");
	printf(",\"page_size\":%ld,\"cpus_online\":%d,\"phase_cgroups\":%s,\"thp_enabled\":%s}\n",
	       sysconf(_SC_PAGESIZE), ncpus_online, per_phase ? "true" : "false",
	       thp < 0 ? "null" : thp ? "true" : "false");

	int n = 0;
	/* warm-up: libbpf's own first-use allocations are not the object's */
	struct bpf_object *obj = open_obj(obj_path, -2, &n);
	if (!obj) {
		printf("{\"kind\":\"error\",\"stage\":\"open\",\"errno\":%d}\n", errno);
		return 3;
	}
	bpf_object__load(obj);
	bpf_object__close(obj);
	settle();

	obj = open_obj(obj_path, -2, &n);
	struct load maps = load_obj(obj);
	printf("{\"kind\":\"phase\",\"phase\":\"maps\",\"ok\":%s,\"errno\":%d", maps.err ? "false"
	       : "true", maps.err < 0 ? -maps.err : 0);
	json_num("charged", maps.charged);
	json_num("peak", maps.peak);
	json_num("peak_total", maps.peak_total);
	printf("}\n");
	fflush(stdout);
	bpf_object__close(obj);
	settle();
	long long maps_charged = maps.err ? -1 : maps.charged;

	obj = open_obj(obj_path, -1, &n);
	struct load all = load_obj(obj);
	printf("{\"kind\":\"phase\",\"phase\":\"all\",\"ok\":%s,\"errno\":%d", all.err ? "false"
	       : "true", all.err < 0 ? -all.err : 0);
	json_num("charged", all.charged);
	json_num("peak", all.peak);
	json_num("peak_total", all.peak_total);
	printf("}\n");
	fflush(stdout);
	bpf_object__close(obj);
	settle();

	for (int i = 0; i < n; i++) {
		int m = 0;
		obj = open_obj(obj_path, i, &m);
		struct bpf_program *p = NULL, *q;
		int k = 0;
		bpf_object__for_each_program(q, obj) {
			if (k++ == i)
				p = q;
		}
		struct load one = load_obj(obj);
		print_prog(p, &one, maps_charged);
		bpf_object__close(obj);
		settle();
	}
	printf("{\"kind\":\"done\"}\n");
	return 0;
}
