/* SPDX-License-Identifier: Apache-2.0 */
/* io/out_file.c: where an output file lands, and how it gets there without ever leaving half a file.
 *
 * A regular target is replaced atomically: the contents go to an unnamed file (O_TMPFILE) in the
 * target's directory, which is given a short temporary name only once it is complete and then renamed
 * onto the target. An unnamed file vanishes with the process, so a SIGINT, SIGTERM or SIGKILL during a
 * long write leaves nothing behind; the short name (".mm.tmp.XXXXXX") works beside a target whose own
 * name is as long as the file system allows. Where O_TMPFILE is not supported, a named temporary file
 * is used instead (the only case in which a killed process can leave one behind).
 *
 * Symbolic links are followed hop by hop (at most MM_OUT_MAX_LINK_HOPS), so a dangling link gets its
 * target created, and a loop is an error instead of being replaced by a file. A target that exists and
 * is neither a regular file nor a directory (/dev/null, /dev/stdout, a FIFO) is written through, never
 * replaced; a FIFO that no process opens for reading within MM_OUT_FIFO_WAIT_SECONDS is an error
 * rather than a wait with no end. */
#include "io/out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

/* As the kernel's own limit on symbolic links in one path resolution. */
#define MM_OUT_MAX_LINK_HOPS 40

/* Directory part of path ("." when it has none), newly allocated. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) memcpy(d, path, n), d[n] = '\0';
    return d;
}

/* The path a write to `path` lands on: symbolic links followed one hop at a time; the last one may
 * name a file that does not exist yet (a dangling link gets its target created). */
static int resolve_links(const char *path, char **out, const char **step) {
    char *cur = strdup(path);
    if (!cur) return *step = "out of memory writing", ENOMEM;
    for (int hop = 0;; hop++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode)) break;
        if (hop == MM_OUT_MAX_LINK_HOPS) {
            free(cur);
            *step = "cannot follow the symbolic links of";
            return ELOOP;
        }
        size_t cap = (size_t)sb.st_size + 1 > 256 ? (size_t)sb.st_size + 1 : 256;
        char *link = malloc(cap);
        ssize_t n = link ? readlink(cur, link, cap - 1) : -1;
        if (n < 0) {
            int e = link ? errno : ENOMEM;
            free(link), free(cur);
            *step = e == ENOMEM ? "out of memory writing" : "cannot read the symbolic link";
            return e;
        }
        link[n] = '\0';
        char *next = link;
        if (link[0] != '/') { /* relative to the directory holding the link */
            char *dir = dir_of(cur);
            next = dir ? malloc(strlen(dir) + 1 + (size_t)n + 1) : NULL;
            if (next) sprintf(next, "%s/%s", dir, link);
            free(dir), free(link);
            if (!next) return free(cur), *step = "out of memory writing", ENOMEM;
        }
        free(cur);
        cur = next;
    }
    *out = cur;
    return 0;
}

/* Opens an existing special file for writing. A FIFO is opened without blocking (a plain open would
 * wait for a reader forever) and retried until a reader comes or the wait is over. */
static int open_special(const char *path, const struct stat *sb, int *fd_out, const char **step) {
    *step = "cannot write";
    if (!S_ISFIFO(sb->st_mode)) {
        int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0) return errno;
        *fd_out = fd;
        return 0;
    }
    double deadline = mm_now_seconds() + MM_OUT_FIFO_WAIT_SECONDS;
    for (;;) {
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            int flags = fcntl(fd, F_GETFL);
            if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
                int e = errno;
                close(fd);
                return e;
            }
            *fd_out = fd;
            return 0;
        }
        if (errno != ENXIO) return errno;
        if (mm_now_seconds() >= deadline) {
            *step = "no reader within " MM_OUT_FIFO_WAIT_TEXT " s for the FIFO";
            return ENXIO;
        }
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

static int write_through(const char *path, const struct stat *sb, mm_out_fill_fn fill, void *arg,
                         const char **step) {
    int fd = -1;
    int e = open_special(path, sb, &fd, step);
    if (e) return e;
    *step = "cannot write";
    e = fill(fd, arg);
    if (close(fd) != 0 && e == 0) e = errno;
    return e;
}

/* A fresh short name in dir: ".mm.tmp." and six characters from the clock, the pid and a counter. */
static void temp_name(char *buf, size_t cap, const char *dir, unsigned attempt) {
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t v = (uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)getpid() << 20 ^ attempt * 40503u;
    char suffix[7];
    for (int i = 0; i < 6; i++, v /= 36) suffix[i] = digits[v % 36];
    suffix[6] = '\0';
    snprintf(buf, cap, "%s/.mm.tmp.%s", dir, suffix);
}

/* Gives the complete unnamed file a temporary name in dir (linkat through /proc, which needs no
 * privilege), retrying on a name already taken. */
static int name_unnamed(int fd, const char *dir, char *name, size_t cap) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        temp_name(name, cap, dir, attempt);
        if (linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0) return 0;
        if (errno != EEXIST) return errno;
    }
    return EEXIST;
}

/* Writes a temporary file in the target's directory and renames it onto the target. */
static int write_replacing(const char *path, mm_out_fill_fn fill, void *arg, const char **step) {
    char *dir = dir_of(path);
    if (!dir) return *step = "out of memory writing", ENOMEM;
    size_t cap = strlen(dir) + sizeof "/.mm.tmp.XXXXXX";
    char *tmp = malloc(cap);
    if (!tmp) return free(dir), *step = "out of memory writing", ENOMEM;
    tmp[0] = '\0';
    struct stat sb;
    /* A replaced file keeps its permission bits; a new one gets 0644. */
    mode_t mode = stat(path, &sb) == 0 ? (sb.st_mode & 07777) : 0644;
    int named = 0, e = 0;
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EISDIR || errno == EOPNOTSUPP || errno == EINVAL)) {
        snprintf(tmp, cap, "%s/.mm.tmp.XXXXXX", dir); /* no O_TMPFILE here: a named file */
        fd = mkostemp(tmp, O_CLOEXEC);
        named = fd >= 0;
    }
    if (fd < 0) {
        e = errno;
        *step = "cannot create a temporary file beside";
        free(tmp), free(dir);
        return e;
    }
    *step = "cannot set the mode of the temporary file for";
    if (fchmod(fd, mode) != 0) goto fail;
    *step = "cannot write";
    if ((e = fill(fd, arg)) != 0 || fsync(fd) != 0) goto fail;
    if (!named) {
        *step = "cannot name the temporary file for";
        if ((e = name_unnamed(fd, dir, tmp, cap)) != 0) goto fail;
        named = 1;
    }
    int closed = close(fd);
    fd = -1;
    if (closed != 0) goto fail;
    *step = "cannot rename the temporary file onto";
    if (rename(tmp, path) != 0) goto fail;
    free(tmp), free(dir);
    return 0;
fail:
    if (e == 0) e = errno;
    if (fd >= 0) close(fd);
    if (named) unlink(tmp);
    free(tmp), free(dir);
    return e;
}

int mm_out_file_write(const char *path, mm_out_fill_fn fill, void *arg, const char **step) {
    char *target = NULL;
    int e = resolve_links(path, &target, step);
    if (e) return e;
    struct stat sb;
    if (stat(target, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
        e = write_through(target, &sb, fill, arg, step);
    else
        e = write_replacing(target, fill, arg, step);
    free(target);
    return e;
}
