/*
 * /init of a qemu guest that records cgroup v2 memory files for tests/data/cgroup (see
 * capture.py, which builds it with gcc -O2 -static and boots it with bpfmem.host.vm.run_vm).
 *
 * As pid 1 it mounts proc, sysfs, devtmpfs and cgroup2 (/sys/fs/cgroup), then runs /specs.txt,
 * one command a line:
 *   cg PATH MAX          enable +memory in the parent's cgroup.subtree_control, mkdir
 *                        /sys/fs/cgroup/PATH, write MAX to memory.max unless MAX is "-"
 *   child PATH MIB MAPB  fork a child that joins /sys/fs/cgroup/PATH, touches MIB MiB of
 *                        anonymous memory, creates a BPF array map of MAPB bytes (4 KiB values,
 *                        skipped if 0) and sleeps; the parent waits until it is done
 *   sleep SECONDS        (lets deferred stat updates settle)
 *   dump FILE            print FILE ("$child" in it is replaced by the child's pid)
 * Output on /dev/console, one JSON object a line, in run_vm's format:
 *   {"probe":"bpfmem","capture":"cgroup","kernel":REL,"page_size":N}
 *   {"id":"child","ok":true,"pid":P,"map_fd":FD,"map_errno":E}
 *   {"id":FILE,"ok":true,"part":K,"parts":N,"b64":B}     (file text, base64, in parts)
 *   {"id":FILE,"ok":false,"errno":E}                      (could not read it)
 *   {"error":MSG,"errno":E}
 *   {"done":true}
 * and powers off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <linux/bpf.h>

static FILE *out;
static int child_pid = -1;

static void emit(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 2, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof(buf) - 2)
        n = sizeof(buf) - 2;
    buf[n++] = '\n';
    fwrite(buf, 1, n, out); /* one write a line: kernel messages rarely split it */
    fflush(out);
}

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

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void dump(const char *path)
{
    static char data[1 << 20];
    static char enc[1000];
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        emit("{\"id\":\"%s\",\"ok\":false,\"errno\":%d}", path, errno);
        return;
    }
    for (;;) { /* seq files hand out a page or so per read */
        ssize_t n = read(fd, data + len, sizeof(data) - len);
        if (n < 0) {
            emit("{\"id\":\"%s\",\"ok\":false,\"errno\":%d}", path, errno);
            close(fd);
            return;
        }
        if (n == 0 || len + n >= sizeof(data))
            break;
        len += n;
    }
    close(fd);
    const size_t chunk = 600; /* bytes per line: 800 base64 characters */
    int parts = len ? (int)((len + chunk - 1) / chunk) : 1;
    for (int k = 0; k < parts; k++) {
        size_t a = k * chunk, b = a + chunk < len ? a + chunk : len, j = 0;
        for (size_t i = a; i < b; i += 3) {
            unsigned v = (unsigned char)data[i] << 16;
            if (i + 1 < b) v |= (unsigned char)data[i + 1] << 8;
            if (i + 2 < b) v |= (unsigned char)data[i + 2];
            enc[j++] = B64[(v >> 18) & 63];
            enc[j++] = B64[(v >> 12) & 63];
            enc[j++] = i + 1 < b ? B64[(v >> 6) & 63] : '=';
            enc[j++] = i + 2 < b ? B64[v & 63] : '=';
        }
        enc[j] = 0;
        emit("{\"id\":\"%s\",\"ok\":true,\"part\":%d,\"parts\":%d,\"b64\":\"%s\"}",
             path, k, parts, enc);
    }
}

static void child(const char *dir, long mib, long map_bytes, int done_fd)
{
    char path[900], pid[32];
    int map_fd = -1, map_errno = 0;
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    if (write_file(path, pid) != 0)
        _exit(10);
    size_t n = (size_t)mib << 20;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(11);
    for (size_t i = 0; i < n; i += 4096)
        p[i] = 1;
    if (map_bytes > 0) {
        struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY}; /* <= 5.10 charges RLIMIT_MEMLOCK */
        setrlimit(RLIMIT_MEMLOCK, &rl);
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.map_type = BPF_MAP_TYPE_ARRAY;
        attr.key_size = 4;
        attr.value_size = 4096;
        attr.max_entries = (unsigned)(map_bytes / 4096);
        map_fd = (int)syscall(__NR_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
        map_errno = map_fd < 0 ? errno : 0;
    }
    char msg[64];
    int m = snprintf(msg, sizeof(msg), "%d %d", map_fd, map_errno);
    if (write(done_fd, msg, m) != m)
        _exit(12);
    close(done_fd);
    for (;;)
        pause();
}

static void run(FILE *f)
{
    char line[1024], a[600], b[64], c[64];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "cg %599s %63s", a, b) == 2) {
            char path[800], parent[800];
            snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", a);
            snprintf(parent, sizeof(parent), "%s", path);
            *strrchr(parent, '/') = 0;
            strcat(parent, "/cgroup.subtree_control");
            if (write_file(parent, "+memory") != 0)
                emit("{\"error\":\"+memory in %s\",\"errno\":%d}", parent, errno);
            if (mkdir(path, 0755) != 0)
                emit("{\"error\":\"mkdir %s\",\"errno\":%d}", path, errno);
            if (strcmp(b, "-")) {
                strcat(path, "/memory.max");
                if (write_file(path, b) != 0)
                    emit("{\"error\":\"write %s\",\"errno\":%d}", path, errno);
            }
        } else if (sscanf(line, "child %599s %63s %63s", a, b, c) == 3) {
            char dir[800];
            int fds[2];
            snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", a);
            if (pipe(fds) != 0)
                continue;
            child_pid = fork();
            if (child_pid == 0) {
                close(fds[0]);
                child(dir, atol(b), atol(c), fds[1]);
            }
            close(fds[1]);
            char msg[64] = {0};
            ssize_t n = read(fds[0], msg, sizeof(msg) - 1);
            close(fds[0]);
            int map_fd = -1, map_errno = -1;
            if (n <= 0 || sscanf(msg, "%d %d", &map_fd, &map_errno) != 2) {
                int st = 0;
                waitpid(child_pid, &st, 0);
                emit("{\"error\":\"child failed\",\"errno\":%d}", WEXITSTATUS(st));
                child_pid = -1;
                continue;
            }
            emit("{\"id\":\"child\",\"ok\":true,\"pid\":%d,\"map_fd\":%d,\"map_errno\":%d}",
                 child_pid, map_fd, map_errno);
        } else if (sscanf(line, "sleep %63s", b) == 1) {
            sleep((unsigned)atoi(b));
        } else if (sscanf(line, "dump %599s", a) == 1) {
            char path[800], *at = strstr(a, "$child");
            if (at) {
                *at = 0;
                snprintf(path, sizeof(path), "%s%d%s", a, child_pid, at + 6);
            } else {
                snprintf(path, sizeof(path), "%s", a);
            }
            dump(path);
        }
    }
}

int main(void)
{
    out = stdout;
    if (getpid() == 1) {
        mount("proc", "/proc", "proc", 0, NULL);
        mount("sysfs", "/sys", "sysfs", 0, NULL);
        mkdir("/dev", 0755);
        mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
        int cfd = open("/dev/console", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (cfd >= 0) {
            out = fdopen(cfd, "w");
            dup2(cfd, 2);
        }
        if (!out)
            out = stdout;
    }
    struct utsname u;
    uname(&u);
    emit("{\"probe\":\"bpfmem\",\"capture\":\"cgroup\",\"kernel\":\"%s\",\"page_size\":%ld}",
         u.release, sysconf(_SC_PAGESIZE));
    if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, NULL) != 0)
        emit("{\"error\":\"mount cgroup2\",\"errno\":%d}", errno);
    FILE *f = fopen("/specs.txt", "r");
    if (!f)
        emit("{\"error\":\"open /specs.txt\",\"errno\":%d}", errno);
    else
        run(f);
    emit("{\"done\":true}");
    if (child_pid > 0) {
        kill(child_pid, SIGKILL);
        waitpid(child_pid, NULL, 0);
    }
    if (getpid() == 1) {
        sync();
        reboot(RB_POWER_OFF);
        for (;;)
            pause();
    }
    return 0;
}
