/* SPDX-License-Identifier: Apache-2.0 */
/* io/out_file.h: writing an output file atomically, following symbolic links, through special files.
 *
 * Every output megamoe writes (case outputs, safetensors files) goes through mm_out_file_write, so the
 * rules are one: a reader never sees a half-written file, a failed or killed write leaves an existing
 * target as it was and no temporary file behind, links are followed (dangling ones too, loops are an
 * error), and special files are written through with no endless wait on a FIFO. */
#ifndef MEGAMOE_IO_OUT_FILE_H
#define MEGAMOE_IO_OUT_FILE_H

/* How long a write to a FIFO waits for a process to open it for reading. */
#define MM_OUT_FIFO_WAIT_SECONDS 10.0
#define MM_OUT_FIFO_WAIT_TEXT    "10"

/* Writes the whole contents to the open descriptor: 0 or the errno of the failed write. */
typedef int (*mm_out_fill_fn)(int fd, void *arg);

/* Writes path with fill(fd, arg). Returns 0 or an errno (ENOMEM included); on failure *step says what
 * failed, phrased to be followed by the quoted path ("cannot write", "cannot follow the symbolic links
 * of", ...). */
int mm_out_file_write(const char *path, mm_out_fill_fn fill, void *arg, const char **step);

#endif
