/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_trace.h: the Chrome / Perfetto JSON trace of `--trace FILE` (run, every --op, and
 * layer): a process, named tracks (threads: one per rank, one for the host's setup and check phases),
 * complete slices ("ph":"X") and flows ("ph":"s" / "f") on the CLOCK_MONOTONIC time line
 * (cli_now_seconds), shifted so that the trace starts near 0. Load the file in ui.perfetto.dev or
 * chrome://tracing. */
#ifndef MEGAMOE_TOOLS_CLI_TRACE_H
#define MEGAMOE_TOOLS_CLI_TRACE_H

#include <stdint.h>
#include <stdio.h>

typedef struct cli_trace {
    FILE *file; /* NULL: no trace (every call does nothing) */
    int events_written;
    double origin; /* seconds subtracted from every timestamp; < 0 until the first slice sets it */
    int64_t flows; /* flow ids given so far (cli_trace_arrow) */
} cli_trace;

/* Opens the file and names the process; 0, or -1 after one error line naming `command` (none when it is
 * NULL: the caller reports). */
int cli_trace_open(cli_trace *t, const char *command, const char *path, const char *process);
/* A command's --trace FILE with the host's track (tid 0, first) named: with path NULL, *t traces nothing
 * (no --trace); else cli_trace_open and "host". 0, or -1 after one error line naming `command`. */
int cli_trace_start(cli_trace *t, const char *command, const char *path, const char *process);
/* Names track `tid` and places it at `sort` among the tracks. */
void cli_trace_thread(cli_trace *t, int64_t tid, const char *name, int64_t sort);
/* A slice of track `tid` from begin to end (seconds). args: the members of its "args" object as JSON
 * text (`"iteration":3`), or NULL. */
void cli_trace_slice(cli_trace *t, int64_t tid, const char *name, const char *cat, double begin, double end,
                     const char *args);
/* The same slice in two calls, for args too long for one string: the caller writes the members of its
 * "args" object to t->file between them (only when t->file is not NULL). */
void cli_trace_slice_open(cli_trace *t, int64_t tid, const char *name, const char *cat, double begin,
                          double end);
void cli_trace_slice_close(cli_trace *t);
/* One end of a flow (an arrow between slices, ui.perfetto.dev and chrome://tracing): the start (finish
 * 0) binds to the slice of track tid open at `at`, the finish (1) to the slice enclosing `at` on its
 * track; both ends share id, name and cat. */
void cli_trace_flow(cli_trace *t, int64_t tid, const char *name, const char *cat, int64_t id, double at,
                    int finish);
/* A flow (new id) from the slice of track from_tid that runs from `from_begin` to `from_end` to the slice
 * of track to_tid enclosing `to`. It leaves just inside the sender's start (where its sends begin), not
 * its middle: a sending slice can also hold the wait for other ranks' data, so a receiver may consume
 * the rows before the sender's slice is half over, and an arrow from the middle would go back in time. */
void cli_trace_arrow(cli_trace *t, const char *name, const char *cat, int64_t from_tid, double from_begin,
                     double from_end, int64_t to_tid, double to);
/* Ends and closes the file; 0, or -1 after one error line (command NULL: none) when writing failed. */
int cli_trace_close(cli_trace *t, const char *command, const char *path);

#endif
