/* io_error_shim: an LD_PRELOAD library for the end-to-end tests that makes chosen filesystem calls
 * of the real daemon binary fail with EIO, for paths at or below one directory, switched on and
 * off while the daemon runs. It stands in for a failing disk where the kernel offers no way to
 * make one (no device-mapper dm-error/dm-flakey, no fail_make_request or fail_function fault
 * injection: RELIABILITY.md, "Disk full and I/O errors"). It can also trace every such call below
 * the directory, with the time it began, and slow down removals there, so that a test can tell
 * what the daemon changed on disk and when (test_one_writer.py: nothing after the node's lock is
 * lost).
 *
 * Environment:
 *   VM_IO_ERROR_DIR      absolute path; only calls on paths at or below it are looked at;
 *   VM_IO_ERROR_CONTROL  a file; while it exists, the operations it names (words separated by
 *                        white space; all of them when it is empty) fail with EIO:
 *                          write   write, pwrite, pwrite64, writev on a file below the dir
 *                          fsync   fsync, fdatasync on a file or dir below the dir
 *                          create  open, open64, openat, openat64, creat with O_CREAT
 *                          mkdir   mkdir, mkdirat
 *                          symlink symlink, symlinkat
 *                          rename  rename, renameat, renameat2 (either path below the dir)
 *                          unlink  unlink, unlinkat without AT_REMOVEDIR
 *                          rmdir   rmdir, unlinkat with AT_REMOVEDIR
 *   VM_IO_ERROR_LOG      optional: a file each injected failure appends one line to
 *                        ("<operation> <path>"), so a test sees that the shim was used;
 *   VM_IO_TRACE_LOG      a file every call of the kinds above on a path below the dir appends
 *                        one line to, failed or not (an open only with O_CREAT):
 *                        "<seconds>.<nanoseconds> <operation> <path>", the CLOCK_REALTIME time
 *                        the call began (before any delay below), the operation as named above;
 *                        a rename names both paths, "<from> <to>", when either is below the dir
 *                        (paths are resolved to absolute ones, and printed as they are: one
 *                        with a space or a newline is ambiguous);
 *   VM_IO_SLOW_UNLINK_MS a number of milliseconds to sleep before each unlink and rmdir below
 *                        the dir (a slow disk that keeps a removal busy while a test acts).
 * Failures need the first two variables; tracing and the delay need the dir with their own
 * variable. With none of them, or without the dir, every call goes straight to libc.
 *
 * It covers the glibc wrappers the daemon and libstdc++ call (nm -D, strace); a call made by a
 * raw syscall(2) or inside glibc itself (fopen, remove) is not intercepted. Its own reads and
 * writes of the control and log files are raw syscalls, one write(2) per line with O_APPEND, so
 * nothing it does comes back into it and concurrent lines never mix. Thread-safe: no state but
 * the libc entry points and the variables above, read once at load time. */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE /* the fortified inline open() would clash with the one defined here */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void*, size_t);
typedef ssize_t (*pwrite_fn)(int, const void*, size_t, off_t);
typedef ssize_t (*pwrite64_fn)(int, const void*, size_t, off64_t);
typedef ssize_t (*writev_fn)(int, const struct iovec*, int);
typedef int (*fd_fn)(int);
typedef int (*open_fn)(const char*, int, ...);
typedef int (*openat_fn)(int, const char*, int, ...);
typedef int (*creat_fn)(const char*, mode_t);
typedef int (*mkdir_fn)(const char*, mode_t);
typedef int (*mkdirat_fn)(int, const char*, mode_t);
typedef int (*symlink_fn)(const char*, const char*);
typedef int (*symlinkat_fn)(const char*, int, const char*);
typedef int (*rename_fn)(const char*, const char*);
typedef int (*renameat_fn)(int, const char*, int, const char*);
typedef int (*renameat2_fn)(int, const char*, int, const char*, unsigned int);
typedef int (*unlink_fn)(const char*);
typedef int (*unlinkat_fn)(int, const char*, int);

static write_fn real_write;
static pwrite_fn real_pwrite;
static pwrite64_fn real_pwrite64;
static writev_fn real_writev;
static fd_fn real_fsync, real_fdatasync;
static open_fn real_open, real_open64;
static openat_fn real_openat, real_openat64;
static creat_fn real_creat;
static mkdir_fn real_mkdir;
static mkdirat_fn real_mkdirat;
static symlink_fn real_symlink;
static symlinkat_fn real_symlinkat;
static rename_fn real_rename;
static renameat_fn real_renameat;
static renameat2_fn real_renameat2;
static unlink_fn real_unlink, real_rmdir;
static unlinkat_fn real_unlinkat;

static const char* fault_dir; /* null: the shim is inert */
static size_t fault_dir_len;
static const char* control_file;
static const char* log_file;
static const char* trace_file;
static long slow_unlink_ms;

/* dlsym's object pointer into a function pointer (memcpy: ISO C has no cast between them). */
#define LOOKUP(var, name)               \
  do {                                  \
    void* sym = dlsym(RTLD_NEXT, name); \
    memcpy(&(var), &sym, sizeof(var));  \
  } while (0)

__attribute__((constructor)) static void init(void) {
  LOOKUP(real_write, "write");
  LOOKUP(real_pwrite, "pwrite");
  LOOKUP(real_pwrite64, "pwrite64");
  LOOKUP(real_writev, "writev");
  LOOKUP(real_fsync, "fsync");
  LOOKUP(real_fdatasync, "fdatasync");
  LOOKUP(real_open, "open");
  LOOKUP(real_open64, "open64");
  LOOKUP(real_openat, "openat");
  LOOKUP(real_openat64, "openat64");
  LOOKUP(real_creat, "creat");
  LOOKUP(real_mkdir, "mkdir");
  LOOKUP(real_mkdirat, "mkdirat");
  LOOKUP(real_symlink, "symlink");
  LOOKUP(real_symlinkat, "symlinkat");
  LOOKUP(real_rename, "rename");
  LOOKUP(real_renameat, "renameat");
  LOOKUP(real_renameat2, "renameat2");
  LOOKUP(real_unlink, "unlink");
  LOOKUP(real_rmdir, "rmdir");
  LOOKUP(real_unlinkat, "unlinkat");
  const char* dir = getenv("VM_IO_ERROR_DIR");
  if (dir == NULL || dir[0] != '/') return;
  const char* control = getenv("VM_IO_ERROR_CONTROL");
  if (control != NULL && control[0] != '\0') {
    control_file = control;
    log_file = getenv("VM_IO_ERROR_LOG");
  }
  const char* trace = getenv("VM_IO_TRACE_LOG");
  if (trace != NULL && trace[0] != '\0') trace_file = trace;
  const char* slow = getenv("VM_IO_SLOW_UNLINK_MS");
  if (slow != NULL) {
    char* end = NULL;
    const long ms = strtol(slow, &end, 10);
    if (end != slow && *end == '\0' && ms > 0) slow_unlink_ms = ms;
  }
  if (control_file == NULL && trace_file == NULL && slow_unlink_ms == 0) return;
  fault_dir = dir;
  fault_dir_len = strlen(dir);
  while (fault_dir_len > 1 && dir[fault_dir_len - 1] == '/') --fault_dir_len;
}

/* Whether the control file exists and names `op` (or names nothing). Reads it with raw syscalls,
 * so nothing here comes back into the shim. */
static int op_enabled(const char* op) {
  if (control_file == NULL) return 0;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, control_file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[256];
  ssize_t n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return 1;
  buf[n] = '\0';
  const size_t len = strlen(op);
  for (char* p = buf; *p != '\0';) {
    while (*p == ' ' || *p == '\n' || *p == '\t') ++p;
    char* end = p;
    while (*end != '\0' && *end != ' ' && *end != '\n' && *end != '\t') ++end;
    if ((size_t)(end - p) == len && memcmp(p, op, len) == 0) return 1;
    p = end;
  }
  return 0;
}

/* The absolute path of `path` relative to `dirfd` (AT_FDCWD or an open dir), into `out`; an
 * empty string when it cannot be told. */
static void resolve(int dirfd, const char* path, char* out, size_t size) {
  out[0] = '\0';
  if (path == NULL) return;
  if (path[0] == '/') {
    const int n = snprintf(out, size, "%s", path);
    if (n < 0 || (size_t)n >= size) out[0] = '\0';
    return;
  }
  char base[PATH_MAX];
  if (dirfd == AT_FDCWD) {
    if (getcwd(base, sizeof base) == NULL) return;
  } else {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    ssize_t n = readlink(link, base, sizeof base - 1);
    if (n <= 0) return;
    base[n] = '\0';
  }
  const int n =
      path[0] == '\0' ? snprintf(out, size, "%s", base) : snprintf(out, size, "%s/%s", base, path);
  if (n < 0 || (size_t)n >= size) out[0] = '\0'; /* too long to tell */
}

static int below_fault_dir(const char* abs) {
  return strncmp(abs, fault_dir, fault_dir_len) == 0 &&
         (abs[fault_dir_len] == '/' || abs[fault_dir_len] == '\0');
}

/* Appends `line` (`n` bytes) to `file` in one write, with raw syscalls: nothing comes back into
 * the shim, and lines written at once by several threads never mix. */
static void append(const char* file, const char* line, int n) {
  if (n <= 0) return;
  int fd =
      (int)syscall(SYS_openat, AT_FDCWD, file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  syscall(SYS_write, fd, line, (size_t)n);
  syscall(SYS_close, fd);
}

static void record(const char* op, const char* abs) {
  if (log_file == NULL) return;
  char line[PATH_MAX + 32];
  int n = snprintf(line, sizeof line, "%s %s\n", op, abs);
  if (n <= 0) return;
  if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
  append(log_file, line, n);
}

/* When the call began, for its trace line: taken first, before the path is resolved or the call
 * delayed. */
static void began(struct timespec* at) {
  at->tv_sec = 0;
  at->tv_nsec = 0;
  if (trace_file != NULL) clock_gettime(CLOCK_REALTIME, at);
}

/* The trace line of a call on `abs` (and `to`, a rename's second path, or null). */
static void trace(const struct timespec* at, const char* op, const char* abs, const char* to) {
  if (trace_file == NULL) return;
  char line[2 * PATH_MAX + 64];
  int n = to == NULL ? snprintf(line, sizeof line, "%lld.%09ld %s %s\n", (long long)at->tv_sec,
                                at->tv_nsec, op, abs)
                     : snprintf(line, sizeof line, "%lld.%09ld %s %s %s\n", (long long)at->tv_sec,
                                at->tv_nsec, op, abs, to);
  if (n <= 0) return;
  if ((size_t)n >= sizeof line) {
    n = (int)sizeof line - 1;
    line[n - 1] = '\n';
  }
  append(trace_file, line, n);
}

static int slowed(const char* op) {
  return slow_unlink_ms > 0 && (strcmp(op, "unlink") == 0 || strcmp(op, "rmdir") == 0);
}

static void slow_down(void) {
  struct timespec left = {slow_unlink_ms / 1000, (slow_unlink_ms % 1000) * 1000000L};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

/* Whether the call `op` on `path` (relative to `dirfd`; "" for the file `dirfd` itself) is to
 * fail: then errno is EIO. A call below the dir is traced, then delayed when it is a removal, and
 * only then is the control file asked (a test that switches failures on meanwhile gets them). */
static int fail_path(const char* op, int dirfd, const char* path) {
  if (fault_dir == NULL) return 0;
  struct timespec at;
  began(&at);
  int fail = op_enabled(op);
  if (!fail && trace_file == NULL && !slowed(op)) return 0;
  char abs[PATH_MAX];
  resolve(dirfd, path, abs, sizeof abs);
  if (abs[0] == '\0' || !below_fault_dir(abs)) return 0;
  trace(&at, op, abs, NULL);
  if (slowed(op)) {
    slow_down();
    fail = op_enabled(op);
  }
  if (!fail) return 0;
  record(op, abs);
  errno = EIO;
  return 1;
}

/* The same for a call on an open file descriptor. */
static int fail_fd(const char* op, int fd) { return fd >= 0 && fail_path(op, fd, ""); }

/* The same for a rename, looked at when either path is below the dir (the failure recorded
 * names the destination when it is below, else the source). */
static int fail_rename(int from_dirfd, const char* from, int to_dirfd, const char* to) {
  if (fault_dir == NULL) return 0;
  struct timespec at;
  began(&at);
  const int fail = op_enabled("rename");
  if (!fail && trace_file == NULL) return 0;
  char from_abs[PATH_MAX], to_abs[PATH_MAX];
  resolve(from_dirfd, from, from_abs, sizeof from_abs);
  resolve(to_dirfd, to, to_abs, sizeof to_abs);
  const int from_below = from_abs[0] != '\0' && below_fault_dir(from_abs);
  const int to_below = to_abs[0] != '\0' && below_fault_dir(to_abs);
  if (!from_below && !to_below) return 0;
  trace(&at, "rename", from_abs[0] != '\0' ? from_abs : "?", to_abs[0] != '\0' ? to_abs : "?");
  if (!fail) return 0;
  record("rename", to_below ? to_abs : from_abs);
  errno = EIO;
  return 1;
}

ssize_t write(int fd, const void* buf, size_t n) {
  if (fail_fd("write", fd)) return -1;
  return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) {
  if (fail_fd("write", fd)) return -1;
  return real_pwrite(fd, buf, n, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t offset) {
  if (fail_fd("write", fd)) return -1;
  return real_pwrite64(fd, buf, n, offset);
}

ssize_t writev(int fd, const struct iovec* iov, int count) {
  if (fail_fd("write", fd)) return -1;
  return real_writev(fd, iov, count);
}

int fsync(int fd) {
  if (fail_fd("fsync", fd)) return -1;
  return real_fsync(fd);
}

int fdatasync(int fd) {
  if (fail_fd("fsync", fd)) return -1;
  return real_fdatasync(fd);
}

/* open's mode argument, present only with O_CREAT or O_TMPFILE. */
#define MODE_ARG(flags, last)              \
  mode_t mode = 0;                         \
  if ((flags) & (O_CREAT | __O_TMPFILE)) { \
    va_list ap;                            \
    va_start(ap, last);                    \
    mode = (mode_t)va_arg(ap, int);        \
    va_end(ap);                            \
  }

int open(const char* path, int flags, ...) {
  MODE_ARG(flags, flags)
  if ((flags & O_CREAT) && fail_path("create", AT_FDCWD, path)) return -1;
  return real_open(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  MODE_ARG(flags, flags)
  if ((flags & O_CREAT) && fail_path("create", AT_FDCWD, path)) return -1;
  return real_open64(path, flags, mode);
}

int openat(int dirfd, const char* path, int flags, ...) {
  MODE_ARG(flags, flags)
  if ((flags & O_CREAT) && fail_path("create", dirfd, path)) return -1;
  return real_openat(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char* path, int flags, ...) {
  MODE_ARG(flags, flags)
  if ((flags & O_CREAT) && fail_path("create", dirfd, path)) return -1;
  return real_openat64(dirfd, path, flags, mode);
}

int creat(const char* path, mode_t mode) {
  if (fail_path("create", AT_FDCWD, path)) return -1;
  return real_creat(path, mode);
}

int mkdir(const char* path, mode_t mode) {
  if (fail_path("mkdir", AT_FDCWD, path)) return -1;
  return real_mkdir(path, mode);
}

int mkdirat(int dirfd, const char* path, mode_t mode) {
  if (fail_path("mkdir", dirfd, path)) return -1;
  return real_mkdirat(dirfd, path, mode);
}

int symlink(const char* target, const char* linkpath) {
  if (fail_path("symlink", AT_FDCWD, linkpath)) return -1;
  return real_symlink(target, linkpath);
}

int symlinkat(const char* target, int dirfd, const char* linkpath) {
  if (fail_path("symlink", dirfd, linkpath)) return -1;
  return real_symlinkat(target, dirfd, linkpath);
}

int rename(const char* from, const char* to) {
  if (fail_rename(AT_FDCWD, from, AT_FDCWD, to)) return -1;
  return real_rename(from, to);
}

int renameat(int from_dirfd, const char* from, int to_dirfd, const char* to) {
  if (fail_rename(from_dirfd, from, to_dirfd, to)) return -1;
  return real_renameat(from_dirfd, from, to_dirfd, to);
}

int renameat2(int from_dirfd, const char* from, int to_dirfd, const char* to, unsigned int flags) {
  if (fail_rename(from_dirfd, from, to_dirfd, to)) return -1;
  return real_renameat2(from_dirfd, from, to_dirfd, to, flags);
}

int unlink(const char* path) {
  if (fail_path("unlink", AT_FDCWD, path)) return -1;
  return real_unlink(path);
}

int rmdir(const char* path) {
  if (fail_path("rmdir", AT_FDCWD, path)) return -1;
  return real_rmdir(path);
}

int unlinkat(int dirfd, const char* path, int flags) {
  if (fail_path(flags & AT_REMOVEDIR ? "rmdir" : "unlink", dirfd, path)) return -1;
  return real_unlinkat(dirfd, path, flags);
}
