/* SPDX-License-Identifier: Apache-2.0 */
/* input_file.c: the fuzz input as a file path (see input_file.h). */
#include "input_file.h"

#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

const char *fuzz_input_path(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("megamoe_fuzz_input", MFD_CLOEXEC);
        if (fd < 0) return NULL;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) return NULL;
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
        if (n <= 0) return NULL;
        done += (size_t)n;
    }
    return path;
}
