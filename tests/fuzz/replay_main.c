/* SPDX-License-Identifier: Apache-2.0 */
/* replay_main.c: the main() that turns a fuzz harness into an ordinary test. It feeds every file of the
 * folders given on the command line (seed inputs and regressions/<target>/, the inputs that once crashed
 * the target) to LLVMFuzzerTestOneInput, so each `make test` checks them with the normal compiler and
 * without libFuzzer. A harness reports a problem by aborting; this program fails on unreadable folders. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, size = 0;
    uint8_t *data = malloc(cap);
    size_t n;
    while (data && (n = fread(data + size, 1, cap - size, f)) > 0) {
        size += n;
        if (size == cap) {
            uint8_t *bigger = realloc(data, cap * 2);
            if (!bigger) free(data);
            data = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (!data) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        return 1;
    }
    printf("replay: %s (%zu bytes)\n", path, size);
    fflush(stdout); /* the name is on screen if the harness aborts */
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files of one folder in name order (a stable order makes a failure reproducible); dot files (the
 * .gitkeep of an empty regressions folder) are not inputs. */
static int replay_folder(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open folder %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    int failed = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        if (!more) {
            failed = 1;
            break;
        }
        names = more;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            failed = 1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 0; i < n; i++) {
        if (!failed) failed = replay_file(names[i]);
        (*count)++;
        free(names[i]);
    }
    free(names);
    return failed;
}

int main(int argc, char **argv) {
    int count = 0;
    for (int i = 1; i < argc; i++)
        if (replay_folder(argv[i], &count)) return 1;
    printf("replay: %d inputs, no failure\n", count);
    return 0;
}
