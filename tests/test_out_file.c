/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_out_file.c: where an output file lands (io/out_file.c) in the cases users hit: a dangling
 * symbolic link (its target is created, the link stays), a link loop (an error, nothing replaced), a
 * target name as long as the file system allows (the temporary name must not push it over), a FIFO with
 * no reader (an error after the bounded wait, not a wait with no end), and a process killed in the
 * middle of a write (no temporary file left behind, the old target intact). All through the public
 * safetensors writer, as `megamoe case -o` uses it. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sys/resource.h>

#include "io/out_file.h"
#include "megamoe/safetensors.h"
#include "testlib.h"

static char tmpdir[64];

/* Writes a safetensors file holding one U8 tensor "t" with the bytes of text, through the public
 * writer; returns its status and leaves the message in *err. */
static mm_status write_text(const char *path, const char *text, mm_error *err) {
    mm_st_writer *w = NULL;
    mm_status st = mm_st_writer_create(&w, err);
    if (st != MM_OK) return st;
    int64_t shape[1] = {(int64_t)strlen(text)};
    mm_tensor t = mm_tensor_make(MM_DTYPE_U8, 1, shape, (void *)text);
    st = mm_st_writer_add(w, "t", &t, err);
    if (st == MM_OK) st = mm_st_writer_write(w, path, err);
    mm_st_writer_destroy(w);
    return st;
}

/* Reads a small file into buf (NUL-terminated); -1 when it cannot be read. */
static int read_small(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (int)n;
}

/* 1 when path holds exactly what write_text(text) gives a plain new file (written aside and removed). */
static int holds(const char *path, const char *text) {
    char plain[128], a[512], b[512];
    mm_error err;
    snprintf(plain, sizeof plain, "%s/plain.reference", tmpdir);
    if (write_text(plain, text, &err) != MM_OK) return 0;
    int na = read_small(path, a, sizeof a), nb = read_small(plain, b, sizeof b);
    unlink(plain);
    return na > 0 && na == nb && memcmp(a, b, (size_t)na) == 0;
}

/* Directory entries other than the names given (NULL-terminated). */
static int count_other_entries(const char *dir, const char *const *keep) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        int kept = 0;
        for (size_t i = 0; keep[i]; i++) kept |= strcmp(e->d_name, keep[i]) == 0;
        n += !kept;
    }
    closedir(d);
    return n;
}

static void test_dangling_link(void) {
    char link[128], target[128];
    snprintf(link, sizeof link, "%s/dangling.st", tmpdir);
    snprintf(target, sizeof target, "%s/made_by_write.st", tmpdir);
    CHECK(symlink("made_by_write.st", link) == 0);
    mm_error err;
    CHECK_OK(write_text(link, "new", &err), &err);
    struct stat sb;
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode)); /* the link is still a link */
    CHECK(holds(target, "new"));
    CHECK(stat(target, &sb) == 0 && (sb.st_mode & 0777) == 0644);
    unlink(link), unlink(target);
}

static void test_link_loop(void) {
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/loop_a", tmpdir);
    snprintf(b, sizeof b, "%s/loop_b", tmpdir);
    CHECK(symlink("loop_b", a) == 0 && symlink("loop_a", b) == 0);
    mm_error err;
    CHECK_STATUS(write_text(a, "x", &err), MM_ERR_IO, &err);
    CHECK_STR_CONTAINS(err.message, "cannot follow the symbolic links of");
    CHECK_STR_CONTAINS(err.message, "Too many levels of symbolic links");
    struct stat sb;
    CHECK(lstat(a, &sb) == 0 && S_ISLNK(sb.st_mode) && lstat(b, &sb) == 0 && S_ISLNK(sb.st_mode));
    unlink(a), unlink(b);
}

static void test_longest_name(void) {
    char name[256], path[384];
    memset(name, 'n', 255);
    name[255] = '\0';
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    mm_error err;
    CHECK_OK(write_text(path, "long", &err), &err);
    CHECK(holds(path, "long"));
    CHECK_OK(write_text(path, "again", &err), &err); /* replacing it works too */
    CHECK(holds(path, "again"));
    unlink(path);
}

static void test_fifo_without_reader(void) {
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/pipe", tmpdir);
    CHECK(mkfifo(fifo, 0600) == 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mm_error err;
    CHECK_STATUS(write_text(fifo, "x", &err), MM_ERR_IO, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK_STR_CONTAINS(err.message, "no reader within 10 s for the FIFO");
    CHECK(waited >= MM_OUT_FIFO_WAIT_SECONDS - 0.5 && waited < MM_OUT_FIFO_WAIT_SECONDS + 20.0);
    struct stat sb;
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode)); /* still a FIFO */
    unlink(fifo);
}

/* A process killed in the middle of a write: the child's file size limit is smaller than the file, and
 * SIGXFSZ's default action ends the process inside write(), as a SIGKILL or SIGINT would. */
static void test_killed_mid_write(void) {
    char target[128];
    snprintf(target, sizeof target, "%s/kept.st", tmpdir);
    mm_error err;
    CHECK_OK(write_text(target, "old contents", &err), &err);
    pid_t child = fork();
    if (child == 0) {
        static char big[1 << 20];
        memset(big, 'b', sizeof big - 1);
        struct rlimit small = {1 << 16, 1 << 16};
        signal(SIGXFSZ, SIG_DFL);
        if (setrlimit(RLIMIT_FSIZE, &small) != 0) _exit(3);
        write_text(target, big, &err);
        _exit(0);
    }
    int status = 0;
    CHECK(child > 0 && waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ);
    CHECK(holds(target, "old contents")); /* the old target is intact */
    static const char *const keep[] = {"kept.st", NULL};
    CHECK_EQ_INT(count_other_entries(tmpdir, keep), 0); /* and no temporary file is left */
    unlink(target);
}

int main(void) {
    if (!mm_test_make_temp_dir(tmpdir, sizeof tmpdir, "megamoe_test_out")) return 1;
    test_dangling_link();
    test_link_loop();
    test_longest_name();
    test_killed_mid_write();
    test_fifo_without_reader();
    rmdir(tmpdir);
    return mm_test_finish("test_out_file");
}
