// SPDX-License-Identifier: MIT
/*
 * libbpf_maps - differential test harness: ask the system libbpf (Debian
 * libbpf-dev 1.1.x) and the running kernel which maps an eBPF object defines.
 *
 * Usage:
 *   libbpf_maps [-v] open OBJ      open-time view (no kernel access, no root)
 *   libbpf_maps [-v] load OBJ      open, disable autoload of every program,
 *                                  clear every pin path, load (creates only the
 *                                  maps), print open-time + kernel views
 *   libbpf_maps [-v] progs OBJ     clear every pin path, load maps AND
 *                                  programs (verifier) with autoload as set
 *                                  at open; if that fails, or for programs
 *                                  left unloaded, reopen and load each one
 *                                  alone; print the maps the kernel says
 *                                  each loaded program uses (map_ids)
 *   libbpf_maps [-v] create        create maps from JSON Lines specs on stdin
 *   libbpf_maps [-v] bench OBJ N   open+close OBJ N times, report wall time
 *
 *   -v  forward libbpf's own log (all levels) to stderr; silent otherwise.
 *
 * stdout is JSON Lines only (one object per line, fixed key order); every
 * diagnostic goes to stderr.  Exit status: 0 ok, 2 usage, 3 failure (an
 * {"kind":"error",...} line was printed).  See README.md for the keys.
 *
 * Input format of "create" (one JSON object per line, blank lines skipped):
 *   {"name":"m","type":1,"key_size":4,"value_size":8,"max_entries":16,
 *    "map_flags":0,"map_extra":0,"numa_node":0,"inner":null}
 * The parser is deliberately strict and tiny:
 *   - the line must be exactly one JSON object (whitespace allowed);
 *   - allowed keys: name (string, required), type, key_size, value_size,
 *     max_entries (non-negative integers, required), map_flags, numa_node
 *     (non-negative integers, default 0), map_extra (non-negative integer up
 *     to 2^64-1, default 0), inner (null or a nested object of the same
 *     shape, default null);
 *   - unknown or duplicate keys, floats, negative numbers, out-of-range u32
 *     values, booleans, arrays and trailing garbage are errors;
 *   - strings accept the JSON escapes \" \\ \/ \b \f \n \r \t and \u00XX
 *     (non-ASCII \u escapes are rejected).
 * A malformed line prints {"kind":"error","stage":"parse",...} and exits 3.
 * For a spec with an inner object, the inner template is created first, its
 * fd passed as inner_map_fd, and closed right after the outer create.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define EXIT_USAGE 2
#define EXIT_FAIL 3

/* ------------------------------------------------------------------------ */
/* libbpf log handling                                                      */

#define MAX_WARNINGS 16
#define WARN_LEN 512

static bool verbose;
static char warnings[MAX_WARNINGS][WARN_LEN];
static int nr_warnings;

static int print_cb(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	int ret = 0;

	if (level == LIBBPF_WARN && nr_warnings < MAX_WARNINGS) {
		char *w = warnings[nr_warnings++];
		size_t len;
		va_list ap2;

		va_copy(ap2, ap);
		vsnprintf(w, WARN_LEN, fmt, ap2);
		va_end(ap2);
		len = strlen(w);
		while (len && (w[len - 1] == '\n' || w[len - 1] == ' '))
			w[--len] = '\0';
	}
	if (verbose)
		ret = vfprintf(stderr, fmt, ap);
	return ret;
}

static void reset_warnings(void)
{
	nr_warnings = 0;
}

/* ------------------------------------------------------------------------ */
/* JSON output helpers                                                      */

static void json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		case '\b': fputs("\\b", f); break;
		case '\f': fputs("\\f", f); break;
		default:
			if (*p < 0x20 || *p >= 0x7f)
				fprintf(f, "\\u%04x", *p); /* bytes as U+00XX */
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

static void json_bool(FILE *f, bool b)
{
	fputs(b ? "true" : "false", f);
}

/* One {"kind":"error",...} line directly on stdout. */
static void print_error(const char *stage, int err, const char *message)
{
	int i;

	if (err < 0)
		err = -err;
	printf("{\"kind\":\"error\",\"stage\":");
	json_str(stdout, stage);
	printf(",\"errno\":%d,\"message\":", err);
	json_str(stdout, message);
	printf(",\"warnings\":[");
	for (i = 0; i < nr_warnings; i++) {
		if (i)
			putchar(',');
		json_str(stdout, warnings[i]);
	}
	printf("]}\n");
	fflush(stdout);
}

static void print_libbpf_error(const char *stage, int err)
{
	char buf[256];

	if (err < 0)
		err = -err;
	if (libbpf_strerror(err, buf, sizeof(buf)))
		snprintf(buf, sizeof(buf), "%s", strerror(err));
	print_error(stage, err, buf);
}

/* ------------------------------------------------------------------------ */
/* Open-time (libbpf) view                                                  */

static void emit_open_map_fields(FILE *f, struct bpf_map *map)
{
	const char *pin = bpf_map__pin_path(map);
	struct bpf_map *inner;

	fputs("\"name\":", f);
	json_str(f, bpf_map__name(map));
	fprintf(f, ",\"type\":%u,\"key_size\":%u,\"value_size\":%u,"
		   "\"max_entries\":%u,\"map_flags\":%u,\"map_extra\":%llu,"
		   "\"numa_node\":%u,\"pinned\":",
		(unsigned)bpf_map__type(map), bpf_map__key_size(map),
		bpf_map__value_size(map), bpf_map__max_entries(map),
		bpf_map__map_flags(map),
		(unsigned long long)bpf_map__map_extra(map),
		bpf_map__numa_node(map));
	json_bool(f, pin != NULL);
	fputs(",\"pin_path\":", f);
	json_str(f, pin);
	fputs(",\"inner\":", f);
	inner = bpf_map__inner_map(map); /* NULL (EINVAL) unless map-in-map */
	if (inner) {
		fputc('{', f);
		emit_open_map_fields(f, inner);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	fprintf(f, ",\"ifindex\":%u,\"internal\":", bpf_map__ifindex(map));
	json_bool(f, bpf_map__is_internal(map));
}

static void emit_prog_line(FILE *f, const struct bpf_program *prog)
{
	fputs("{\"kind\":\"prog\",\"name\":", f);
	json_str(f, bpf_program__name(prog));
	fputs(",\"section\":", f);
	json_str(f, bpf_program__section_name(prog));
	fprintf(f, ",\"type\":%u,\"expected_attach_type\":%u,\"autoload\":",
		(unsigned)bpf_program__type(prog),
		(unsigned)bpf_program__expected_attach_type(prog));
	json_bool(f, bpf_program__autoload(prog));
	fputs("}\n", f);
}

/* Render into a malloc'ed string (caller frees). */
static char *render_open_map(struct bpf_map *map)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fputc('{', f);
	emit_open_map_fields(f, map);
	fputc('}', f);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static char *render_progs(struct bpf_object *obj, int *nr_progs)
{
	struct bpf_program *prog;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	*nr_progs = 0;
	bpf_object__for_each_program(prog, obj) {
		emit_prog_line(f, prog);
		(*nr_progs)++;
	}
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ------------------------------------------------------------------------ */
/* Kernel view                                                              */

/* Returns the memlock value from /proc/self/fdinfo/<fd>, or -1. */
static long long read_memlock(int fd)
{
	char path[64], line[256];
	long long val = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "memlock:", 8) == 0) {
			val = strtoll(line + 8, NULL, 10);
			break;
		}
	}
	fclose(f);
	return val;
}

static int get_map_info(int fd, struct bpf_map_info *info)
{
	__u32 len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	if (bpf_obj_get_info_by_fd(fd, info, &len))
		return -errno;
	return 0;
}

/* Emits a kernel-info object ({...}) or null when the info query fails. */
static void emit_kernel_info(FILE *f, int fd)
{
	struct bpf_map_info info;
	long long memlock;
	char name[BPF_OBJ_NAME_LEN + 1];

	if (fd < 0 || get_map_info(fd, &info)) {
		fputs("null", f);
		return;
	}
	memcpy(name, info.name, BPF_OBJ_NAME_LEN);
	name[BPF_OBJ_NAME_LEN] = '\0';
	fprintf(f, "{\"id\":%u,\"name\":", info.id);
	json_str(f, name);
	fprintf(f, ",\"type\":%u,\"key_size\":%u,\"value_size\":%u,"
		   "\"max_entries\":%u,\"map_flags\":%u,\"map_extra\":%llu,"
		   "\"btf_id\":%u,\"btf_key_type_id\":%u,"
		   "\"btf_value_type_id\":%u,\"btf_vmlinux_value_type_id\":%u,"
		   "\"memlock\":",
		info.type, info.key_size, info.value_size, info.max_entries,
		info.map_flags, (unsigned long long)info.map_extra, info.btf_id,
		info.btf_key_type_id, info.btf_value_type_id,
		info.btf_vmlinux_value_type_id);
	memlock = read_memlock(fd);
	if (memlock < 0)
		fputs("null", f);
	else
		fprintf(f, "%lld", memlock);
	fputc('}', f);
}

static unsigned long long key_to_index(const unsigned char *key, __u32 size)
{
	unsigned long long v = 0;
	__u32 i, n = size < 8 ? size : 8;

	for (i = 0; i < n; i++) /* little-endian (x86_64 / bpf target) */
		v |= (unsigned long long)key[i] << (8 * i);
	return v;
}

/*
 * Walk every key of an fd-holding map (map-in-map or prog array) and emit
 * the populated slots.  For map-in-map outers each slot carries the kernel
 * info of the inner map; for prog arrays just the index and program id.
 */
static void emit_slots(FILE *f, int fd, const struct bpf_map_info *info,
		       bool is_prog_array)
{
	unsigned char *prev, *next;
	__u32 id;
	bool first = true, have_prev = false;

	prev = calloc(1, info->key_size ? info->key_size : 1);
	next = calloc(1, info->key_size ? info->key_size : 1);
	if (!prev || !next || info->value_size != sizeof(__u32)) {
		free(prev);
		free(next);
		fputs("null", f);
		return;
	}
	fputc('[', f);
	while (bpf_map_get_next_key(fd, have_prev ? prev : NULL, next) == 0) {
		unsigned long long idx = key_to_index(next, info->key_size);

		if (bpf_map_lookup_elem(fd, next, &id) == 0) {
			if (!first)
				fputc(',', f);
			first = false;
			if (is_prog_array) {
				fprintf(f, "%llu", idx);
			} else {
				int inner_fd = bpf_map_get_fd_by_id(id);

				fprintf(f, "{\"index\":%llu,\"map\":", idx);
				emit_kernel_info(f, inner_fd);
				fputc('}', f);
				if (inner_fd >= 0)
					close(inner_fd);
			}
		}
		memcpy(prev, next, info->key_size);
		have_prev = true;
	}
	fputc(']', f);
	free(prev);
	free(next);
}

/* ------------------------------------------------------------------------ */
/* Modes                                                                    */

static struct bpf_object *open_obj(const char *path)
{
	struct bpf_object *obj;
	int err;

	reset_warnings();
	obj = bpf_object__open_file(path, NULL);
	if (!obj) {
		err = errno ? errno : EINVAL;
		print_libbpf_error("open", err);
	}
	return obj;
}

static int count_maps(struct bpf_object *obj)
{
	struct bpf_map *map;
	int n = 0;

	bpf_object__for_each_map(map, obj)
		n++;
	return n;
}

static int count_progs(struct bpf_object *obj)
{
	struct bpf_program *prog;
	int n = 0;

	bpf_object__for_each_program(prog, obj)
		n++;
	return n;
}

static int mode_open(const char *path)
{
	struct bpf_object *obj;
	struct bpf_map *map;
	char *progs;
	int nr_maps = 0, nr_progs = 0;

	obj = open_obj(path);
	if (!obj)
		return EXIT_FAIL;

	bpf_object__for_each_map(map, obj) {
		fputs("{\"kind\":\"map\",", stdout);
		emit_open_map_fields(stdout, map);
		fputs("}\n", stdout);
		nr_maps++;
	}
	progs = render_progs(obj, &nr_progs);
	if (progs)
		fputs(progs, stdout);
	free(progs);
	fputs("{\"kind\":\"object\",\"name\":", stdout);
	json_str(stdout, bpf_object__name(obj));
	printf(",\"nr_maps\":%d,\"nr_progs\":%d}\n", nr_maps, nr_progs);
	bpf_object__close(obj);
	return 0;
}

static int mode_load(const char *path)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *map;
	char **open_views = NULL, *progs = NULL, *out = NULL;
	size_t out_len = 0;
	int i, nr_maps, nr_progs = 0, err, ret = EXIT_FAIL;
	FILE *f;

	obj = open_obj(path);
	if (!obj)
		return EXIT_FAIL;

	/* Capture the open-time view before touching anything. */
	nr_maps = count_maps(obj);
	open_views = calloc(nr_maps ? nr_maps : 1, sizeof(*open_views));
	progs = render_progs(obj, &nr_progs);
	if (!open_views || !progs) {
		print_error("load", ENOMEM, "out of memory");
		goto out;
	}
	i = 0;
	bpf_object__for_each_map(map, obj) {
		open_views[i] = render_open_map(map);
		if (!open_views[i]) {
			print_error("load", ENOMEM, "out of memory");
			goto out;
		}
		i++;
	}

	/* Create maps only: no programs, no pins. */
	bpf_object__for_each_program(prog, obj) {
		err = bpf_program__set_autoload(prog, false);
		if (err) {
			print_libbpf_error("load", err);
			goto out;
		}
	}
	bpf_object__for_each_map(map, obj) {
		err = bpf_map__set_pin_path(map, NULL);
		if (err || bpf_map__pin_path(map)) {
			print_error("load", err ? -err : EINVAL,
				    "could not clear pin path");
			goto out;
		}
	}

	reset_warnings();
	err = bpf_object__load(obj);
	if (err) {
		print_libbpf_error("load", err);
		goto out;
	}

	f = open_memstream(&out, &out_len);
	if (!f) {
		print_error("load", ENOMEM, "out of memory");
		goto out;
	}
	i = 0;
	bpf_object__for_each_map(map, obj) {
		int fd = bpf_map__fd(map);
		struct bpf_map_info info;
		bool have_info = fd >= 0 && get_map_info(fd, &info) == 0;

		fputs("{\"kind\":\"map\",\"name\":", f);
		json_str(f, bpf_map__name(map));
		fprintf(f, ",\"open\":%s,\"kernel\":", open_views[i++]);
		emit_kernel_info(f, fd);
		/* "slots" / "prog_slots" only appear for those map types. */
		if (have_info && (info.type == BPF_MAP_TYPE_ARRAY_OF_MAPS ||
				  info.type == BPF_MAP_TYPE_HASH_OF_MAPS)) {
			fputs(",\"slots\":", f);
			emit_slots(f, fd, &info, false);
		}
		if (have_info && info.type == BPF_MAP_TYPE_PROG_ARRAY) {
			fputs(",\"prog_slots\":", f);
			emit_slots(f, fd, &info, true);
		}
		fputs("}\n", f);
	}
	fputs(progs, f);
	fputs("{\"kind\":\"object\",\"name\":", f);
	json_str(f, bpf_object__name(obj));
	fprintf(f, ",\"nr_maps\":%d,\"nr_progs\":%d,\"possible_cpus\":%d}\n",
		nr_maps, nr_progs, libbpf_num_possible_cpus());
	if (fclose(f)) {
		print_error("load", ENOMEM, "out of memory");
		goto out;
	}
	fputs(out, stdout);
	ret = 0;
out:
	bpf_object__close(obj); /* closes every map fd; nothing was pinned */
	if (open_views)
		for (i = 0; i < nr_maps; i++)
			free(open_views[i]);
	free(open_views);
	free(progs);
	free(out);
	return ret;
}

static int mode_bench(const char *path, const char *count)
{
	struct timespec t0, t1;
	struct bpf_object *obj;
	char *end;
	long n, i;

	errno = 0;
	n = strtol(count, &end, 10);
	if (errno || *end || end == count || n < 0) {
		fprintf(stderr, "libbpf_maps: bad count '%s'\n", count);
		return EXIT_USAGE;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++) {
		obj = open_obj(path);
		if (!obj)
			return EXIT_FAIL;
		bpf_object__close(obj);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("{\"kind\":\"bench\",\"opens\":%ld,\"seconds\":%.6f}\n", n,
	       (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* "progs": load programs through the verifier, list the maps each one uses */

struct map_ref {
	__u32 id;
	char name[BPF_OBJ_NAME_LEN + 1];
};

static int cmp_map_ref(const void *a, const void *b)
{
	const struct map_ref *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Render the "loaded" prog line (kernel's bpf_prog_info.map_ids, resolved to
 * map names) into a malloc'ed string, or NULL with *err set.
 */
static char *render_loaded_prog(const struct bpf_program *prog, int *err)
{
	struct bpf_prog_info info;
	struct map_ref *refs = NULL;
	__u32 *ids = NULL, len, nr, i;
	char *buf = NULL;
	size_t buf_len = 0;
	int fd = bpf_program__fd(prog);
	FILE *f;

	*err = 0;
	memset(&info, 0, sizeof(info));
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		*err = errno;
		return NULL;
	}
	nr = info.nr_map_ids;
	ids = calloc(nr ? nr : 1, sizeof(*ids));
	refs = calloc(nr ? nr : 1, sizeof(*refs));
	if (!ids || !refs) {
		*err = ENOMEM;
		goto out;
	}
	if (nr) {
		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		info.nr_map_ids = nr;
		info.map_ids = (__u64)(unsigned long)ids;
		if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
			*err = errno;
			goto out;
		}
		if (info.nr_map_ids < nr) /* cannot shrink; be defensive */
			nr = info.nr_map_ids;
	}
	for (i = 0; i < nr; i++) {
		struct bpf_map_info minfo;
		int mfd = bpf_map_get_fd_by_id(ids[i]);

		if (mfd < 0) {
			*err = errno;
			goto out;
		}
		*err = -get_map_info(mfd, &minfo);
		close(mfd);
		if (*err)
			goto out;
		refs[i].id = ids[i];
		memcpy(refs[i].name, minfo.name, BPF_OBJ_NAME_LEN);
		refs[i].name[BPF_OBJ_NAME_LEN] = '\0';
	}
	qsort(refs, nr, sizeof(*refs), cmp_map_ref);

	f = open_memstream(&buf, &buf_len);
	if (!f) {
		*err = ENOMEM;
		goto out;
	}
	fputs("{\"kind\":\"prog\",\"name\":", f);
	json_str(f, bpf_program__name(prog));
	fputs(",\"section\":", f);
	json_str(f, bpf_program__section_name(prog));
	fputs(",\"loaded\":true,\"map_names\":[", f);
	for (i = 0; i < nr; i++) {
		if (i)
			fputc(',', f);
		json_str(f, refs[i].name);
	}
	fputs("],\"map_ids\":[", f);
	for (i = 0; i < nr; i++)
		fprintf(f, "%s%u", i ? "," : "", refs[i].id);
	fputs("]}\n", f);
	if (fclose(f)) {
		free(buf);
		buf = NULL;
		*err = ENOMEM;
	}
out:
	free(ids);
	free(refs);
	return buf;
}

static char *render_failed_prog(const struct bpf_program *prog, int err)
{
	char msg[WARN_LEN + 300], *buf = NULL;
	size_t buf_len = 0, n;
	FILE *f;
	int i;

	if (err < 0)
		err = -err;
	if (libbpf_strerror(err, msg, sizeof(msg)))
		snprintf(msg, sizeof(msg), "%s", strerror(err));
	/* Append libbpf's first warning: it names the failing step. */
	for (i = 0; i < nr_warnings; i++) {
		if (warnings[i][0]) {
			n = strlen(msg);
			snprintf(msg + n, sizeof(msg) - n, ": %s", warnings[i]);
			break;
		}
	}
	f = open_memstream(&buf, &buf_len);
	if (!f)
		return NULL;
	fputs("{\"kind\":\"prog\",\"name\":", f);
	json_str(f, bpf_program__name(prog));
	fputs(",\"section\":", f);
	json_str(f, bpf_program__section_name(prog));
	fprintf(f, ",\"loaded\":false,\"errno\":%d,\"message\":", err);
	json_str(f, msg);
	fputs("}\n", f);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/*
 * One load attempt.  only < 0: autoload as libbpf set it at open; otherwise
 * autoload exactly program #only (iteration order), every other one off.
 * Fills lines[i] (if still NULL) for every program that got loaded, and for
 * program #only also when the load failed.  Returns 0, or a negative errno
 * when the harness itself failed (an error line has been printed).
 */
static int progs_attempt(const char *path, int only, char **lines,
			 int nr_progs)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *map;
	int i, err, ret = 0;

	obj = open_obj(path);
	if (!obj)
		return -EINVAL;
	i = 0;
	bpf_object__for_each_program(prog, obj) {
		if (only >= 0) {
			err = bpf_program__set_autoload(prog, i == only);
			if (err) {
				print_libbpf_error("load", err);
				ret = err;
				goto out;
			}
		}
		i++;
	}
	if (i != nr_progs) {
		print_error("load", EINVAL, "program count changed between opens");
		ret = -EINVAL;
		goto out;
	}
	bpf_object__for_each_map(map, obj) {
		err = bpf_map__set_pin_path(map, NULL);
		if (err || bpf_map__pin_path(map)) {
			print_error("load", err ? -err : EINVAL,
				    "could not clear pin path");
			ret = err ? err : -EINVAL;
			goto out;
		}
	}

	reset_warnings();
	err = bpf_object__load(obj);
	if (err && only < 0) {
		if (verbose)
			fprintf(stderr, "libbpf_maps: whole-object load failed "
				"(%d); retrying program by program\n", err);
		goto out;
	}
	i = 0;
	bpf_object__for_each_program(prog, obj) {
		int rerr = 0;

		if (!lines[i] && !err && bpf_program__fd(prog) >= 0) {
			lines[i] = render_loaded_prog(prog, &rerr);
			if (!lines[i]) {
				print_error("load", rerr ? rerr : ENOMEM,
					    "bpf_prog_info / map info query failed");
				ret = -(rerr ? rerr : ENOMEM);
				goto out;
			}
		} else if (!lines[i] && err && i == only) {
			lines[i] = render_failed_prog(prog, err);
			if (!lines[i]) {
				print_error("load", ENOMEM, "out of memory");
				ret = -ENOMEM;
				goto out;
			}
		}
		i++;
	}
out:
	bpf_object__close(obj); /* unloads programs, closes map fds; no pins */
	return ret;
}

static int mode_progs(const char *path)
{
	struct bpf_object *obj;
	char **lines = NULL;
	int i, nr_progs, ret = EXIT_FAIL;

	obj = open_obj(path);
	if (!obj)
		return EXIT_FAIL;
	nr_progs = count_progs(obj);
	bpf_object__close(obj);

	lines = calloc(nr_progs ? nr_progs : 1, sizeof(*lines));
	if (!lines) {
		print_error("load", ENOMEM, "out of memory");
		return EXIT_FAIL;
	}
	/* Whole object first, autoload as libbpf computed it at open ... */
	if (progs_attempt(path, -1, lines, nr_progs))
		goto out;
	/* ... then each program not loaded yet, alone. */
	for (i = 0; i < nr_progs; i++)
		if (!lines[i] && progs_attempt(path, i, lines, nr_progs))
			goto out;
	for (i = 0; i < nr_progs; i++) {
		if (!lines[i]) { /* loaded "alone" yet has no fd: cannot happen */
			print_error("load", EINVAL, "program neither loaded nor failed");
			goto out;
		}
	}
	for (i = 0; i < nr_progs; i++)
		fputs(lines[i], stdout);
	ret = 0;
out:
	for (i = 0; i < nr_progs; i++)
		free(lines[i]);
	free(lines);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* "create": strict mini JSON parser for flat map specs                     */

struct map_spec {
	char name[256];
	unsigned long long type, key_size, value_size, max_entries;
	unsigned long long map_flags, map_extra, numa_node;
	struct map_spec *inner;
};

struct parser {
	const char *p;
	const char *err;
};

static void free_spec(struct map_spec *s)
{
	while (s) {
		struct map_spec *next = s->inner;

		free(s);
		s = next;
	}
}

static void skip_ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
	       *ps->p == '\r')
		ps->p++;
}

static int fail(struct parser *ps, const char *msg)
{
	if (!ps->err)
		ps->err = msg;
	return -1;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int parse_string(struct parser *ps, char *out, size_t cap)
{
	size_t n = 0;
	char c;

	if (*ps->p != '"')
		return fail(ps, "expected string");
	ps->p++;
	while ((c = *ps->p) != '"') {
		if (c == '\0')
			return fail(ps, "unterminated string");
		if ((unsigned char)c < 0x20)
			return fail(ps, "control character in string");
		ps->p++;
		if (c == '\\') {
			c = *ps->p++;
			switch (c) {
			case '"': case '\\': case '/': break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'u': {
				int h[4], k;

				for (k = 0; k < 4; k++) {
					h[k] = hexval(ps->p[k]);
					if (h[k] < 0)
						return fail(ps, "bad \\u escape");
				}
				if (h[0] || h[1] || h[2] > 7 || (!h[2] && !h[3]))
					return fail(ps, "only \\u0001-\\u007f supported");
				c = (char)(h[2] * 16 + h[3]);
				ps->p += 4;
				break;
			}
			default:
				return fail(ps, "bad escape");
			}
		}
		if (n + 1 >= cap)
			return fail(ps, "string too long");
		out[n++] = c;
	}
	ps->p++;
	out[n] = '\0';
	return 0;
}

static int parse_uint(struct parser *ps, unsigned long long max,
		      unsigned long long *out)
{
	unsigned long long v = 0;
	const char *start = ps->p;

	if (*ps->p == '-')
		return fail(ps, "negative number");
	if (*ps->p < '0' || *ps->p > '9')
		return fail(ps, "expected non-negative integer");
	if (*ps->p == '0' && ps->p[1] >= '0' && ps->p[1] <= '9')
		return fail(ps, "leading zero");
	while (*ps->p >= '0' && *ps->p <= '9') {
		unsigned d = (unsigned)(*ps->p - '0');

		if (v > (max - d) / 10)
			return fail(ps, "integer out of range");
		v = v * 10 + d;
		ps->p++;
	}
	if (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E')
		return fail(ps, "expected integer, got float");
	if (ps->p == start)
		return fail(ps, "expected integer");
	*out = v;
	return 0;
}

enum {
	F_NAME = 1 << 0, F_TYPE = 1 << 1, F_KEY = 1 << 2, F_VALUE = 1 << 3,
	F_MAX = 1 << 4, F_FLAGS = 1 << 5, F_EXTRA = 1 << 6, F_NUMA = 1 << 7,
	F_INNER = 1 << 8,
	F_REQUIRED = F_NAME | F_TYPE | F_KEY | F_VALUE | F_MAX,
};

static struct map_spec *parse_object(struct parser *ps, int depth)
{
	struct map_spec *s;
	unsigned seen = 0;
	char key[32];

	if (depth > 4) {
		fail(ps, "nesting too deep");
		return NULL;
	}
	skip_ws(ps);
	if (*ps->p != '{') {
		fail(ps, "expected '{'");
		return NULL;
	}
	ps->p++;
	s = calloc(1, sizeof(*s));
	if (!s) {
		fail(ps, "out of memory");
		return NULL;
	}
	skip_ws(ps);
	if (*ps->p == '}') {
		ps->p++;
		goto check;
	}
	for (;;) {
		unsigned bit;
		unsigned long long *dst = NULL, max = UINT32_MAX;

		skip_ws(ps);
		if (parse_string(ps, key, sizeof(key)))
			goto err;
		skip_ws(ps);
		if (*ps->p != ':') {
			fail(ps, "expected ':'");
			goto err;
		}
		ps->p++;
		skip_ws(ps);

		if (!strcmp(key, "name"))             bit = F_NAME;
		else if (!strcmp(key, "type"))        bit = F_TYPE, dst = &s->type;
		else if (!strcmp(key, "key_size"))    bit = F_KEY, dst = &s->key_size;
		else if (!strcmp(key, "value_size"))  bit = F_VALUE, dst = &s->value_size;
		else if (!strcmp(key, "max_entries")) bit = F_MAX, dst = &s->max_entries;
		else if (!strcmp(key, "map_flags"))   bit = F_FLAGS, dst = &s->map_flags;
		else if (!strcmp(key, "map_extra"))   bit = F_EXTRA, dst = &s->map_extra, max = UINT64_MAX;
		else if (!strcmp(key, "numa_node"))   bit = F_NUMA, dst = &s->numa_node;
		else if (!strcmp(key, "inner"))       bit = F_INNER;
		else {
			fail(ps, "unknown key");
			goto err;
		}
		if (seen & bit) {
			fail(ps, "duplicate key");
			goto err;
		}
		seen |= bit;

		if (bit == F_NAME) {
			if (parse_string(ps, s->name, sizeof(s->name)))
				goto err;
		} else if (bit == F_INNER) {
			if (!strncmp(ps->p, "null", 4)) {
				ps->p += 4;
			} else {
				s->inner = parse_object(ps, depth + 1);
				if (!s->inner)
					goto err;
			}
		} else if (parse_uint(ps, max, dst)) {
			goto err;
		}

		skip_ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == '}') {
			ps->p++;
			break;
		}
		fail(ps, "expected ',' or '}'");
		goto err;
	}
check:
	if ((seen & F_REQUIRED) != F_REQUIRED) {
		fail(ps, "missing required key (name, type, key_size, value_size, max_entries)");
		goto err;
	}
	return s;
err:
	free_spec(s);
	return NULL;
}

/* Creates the map (and, recursively, its inner template); returns fd or -errno. */
static int create_from_spec(const struct map_spec *s, const char **what)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts);
	int fd, inner_fd = -1, err;

	if (s->inner) {
		inner_fd = create_from_spec(s->inner, what);
		if (inner_fd < 0) {
			*what = "inner map template rejected";
			return inner_fd;
		}
		opts.inner_map_fd = inner_fd;
	}
	opts.map_flags = (__u32)s->map_flags;
	opts.map_extra = s->map_extra;
	opts.numa_node = (__u32)s->numa_node;
	fd = bpf_map_create((enum bpf_map_type)s->type, s->name,
			    (__u32)s->key_size, (__u32)s->value_size,
			    (__u32)s->max_entries, &opts);
	err = fd < 0 ? -errno : 0;
	if (inner_fd >= 0)
		close(inner_fd);
	if (fd < 0)
		*what = NULL;
	return fd < 0 ? err : fd;
}

static int mode_create(void)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	long lineno = 0;
	int ret = 0;

	while ((n = getline(&line, &cap, stdin)) >= 0) {
		struct parser ps = { .p = line };
		struct map_spec *s;
		const char *what = NULL;
		int fd;

		lineno++;
		skip_ws(&ps);
		if (*ps.p == '\0')
			continue;
		if ((size_t)n != strlen(line)) {
			ps.err = "NUL byte in input";
			s = NULL;
		} else {
			s = parse_object(&ps, 0);
		}
		if (s) {
			skip_ws(&ps);
			if (*ps.p != '\0') {
				fail(&ps, "trailing characters after object");
				free_spec(s);
				s = NULL;
			}
		}
		if (!s) {
			char msg[128];

			snprintf(msg, sizeof(msg), "line %ld: %s", lineno,
				 ps.err ? ps.err : "parse error");
			reset_warnings();
			print_error("parse", EINVAL, msg);
			ret = EXIT_FAIL;
			break;
		}

		reset_warnings();
		fd = create_from_spec(s, &what);
		if (fd < 0) {
			char msg[300];

			snprintf(msg, sizeof(msg), "%s%s%s", what ? what : "",
				 what ? ": " : "", strerror(-fd));
			printf("{\"kind\":\"rejected\",\"name\":");
			json_str(stdout, s->name);
			printf(",\"errno\":%d,\"message\":", -fd);
			json_str(stdout, msg);
			printf("}\n");
		} else {
			printf("{\"kind\":\"created\",\"name\":");
			json_str(stdout, s->name);
			printf(",\"kernel\":");
			emit_kernel_info(stdout, fd);
			printf("}\n");
			close(fd);
		}
		fflush(stdout);
		free_spec(s);
	}
	free(line);
	return ret;
}

/* ------------------------------------------------------------------------ */

static void on_signal(int sig)
{
	/*
	 * Nothing is ever pinned, so process exit (which closes every map fd)
	 * releases all kernel objects; bpf_object__close() is not
	 * async-signal-safe, so do not call it here.
	 */
	_exit(128 + sig);
}

/* "hold": load the object's programs and keep them loaded until stdin closes */
static int hold_print(struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			return -errno;
		printf("{\"kind\":\"prog\",\"name\":");
		json_str(stdout, bpf_program__name(prog));
		printf(",\"id\":%u,\"fd\":%d,\"insn_cnt\":%zu}\n", info.id, fd,
		       bpf_program__insn_cnt(prog));
	}
	return 0;
}

static int mode_hold(const char *path)
{
	struct bpf_object *objs[256], *obj;
	struct bpf_program *prog;
	struct bpf_map *map;
	int nr_objs = 0, nr_progs, i, j, ret = EXIT_FAIL;
	char buf[64];

	obj = open_obj(path);
	if (!obj)
		return EXIT_FAIL;
	nr_progs = count_progs(obj);
	bpf_object__for_each_map(map, obj)
		bpf_map__set_pin_path(map, NULL);
	if (!bpf_object__load(obj)) {
		objs[nr_objs++] = obj;
	} else {
		bpf_object__close(obj);
		for (i = 0; i < nr_progs && nr_objs < 256; i++) {
			obj = open_obj(path);
			if (!obj)
				goto out;
			j = 0;
			bpf_object__for_each_program(prog, obj)
				bpf_program__set_autoload(prog, j++ == i);
			bpf_object__for_each_map(map, obj)
				bpf_map__set_pin_path(map, NULL);
			if (bpf_object__load(obj)) {
				bpf_object__close(obj);
				continue;
			}
			objs[nr_objs++] = obj;
		}
	}
	for (i = 0; i < nr_objs; i++)
		if (hold_print(objs[i]))
			goto out;
	printf("{\"kind\":\"ready\",\"objects\":%d}\n", nr_objs);
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	ret = 0;
out:
	for (i = 0; i < nr_objs; i++)
		bpf_object__close(objs[i]);
	return ret;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: libbpf_maps [-v] open OBJ\n"
		"       libbpf_maps [-v] load OBJ\n"
		"       libbpf_maps [-v] progs OBJ\n"
		"       libbpf_maps [-v] hold OBJ\n"
		"       libbpf_maps [-v] create   < specs.jsonl\n"
		"       libbpf_maps [-v] bench OBJ N\n");
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	int i = 1;
	const char *mode;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (i < argc && !strcmp(argv[i], "-v")) {
		verbose = true;
		i++;
	}
	libbpf_set_print(print_cb);

	if (i >= argc) {
		usage();
		return EXIT_USAGE;
	}
	mode = argv[i++];
	if (!strcmp(mode, "open") && argc - i == 1)
		return mode_open(argv[i]);
	if (!strcmp(mode, "load") && argc - i == 1)
		return mode_load(argv[i]);
	if (!strcmp(mode, "progs") && argc - i == 1)
		return mode_progs(argv[i]);
	if (!strcmp(mode, "hold") && argc - i == 1)
		return mode_hold(argv[i]);
	if (!strcmp(mode, "create") && argc - i == 0)
		return mode_create();
	if (!strcmp(mode, "bench") && argc - i == 2)
		return mode_bench(argv[i], argv[i + 1]);
	usage();
	return EXIT_USAGE;
}
