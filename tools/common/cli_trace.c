/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_trace.c: the trace writer of `--trace FILE` (cli_trace.h). */
#include "common/cli_trace.h"

#include <errno.h>
#include <string.h>

#include "common/cli_util.h"

static void comma(cli_trace *t) {
    if (t->events_written++) fputs(",\n", t->file);
}

int cli_trace_open(cli_trace *t, const char *command, const char *path, const char *process) {
    memset(t, 0, sizeof *t);
    t->origin = -1.0;
    t->file = fopen(path, "w");
    if (!t->file) {
        if (command) cli_error(command, "cannot write the trace '%s': %s", path, strerror(errno));
        return -1;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", t->file);
    comma(t);
    fprintf(t->file, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"%s\"}}",
            process);
    return 0;
}

int cli_trace_start(cli_trace *t, const char *command, const char *path, const char *process) {
    *t = (cli_trace){NULL, 0, -1.0, 0};
    if (path && cli_trace_open(t, command, path, process) != 0) return -1;
    cli_trace_thread(t, 0, "host", 0);
    return 0;
}

void cli_trace_thread(cli_trace *t, int64_t tid, const char *name, int64_t sort) {
    if (!t->file) return;
    comma(t);
    fprintf(t->file,
            "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%lld,\"args\":{\"name\":\"%s\"}}",
            (long long)tid, name);
    comma(t);
    fprintf(
        t->file,
        "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":%lld,\"args\":{\"sort_index\":%lld}}",
        (long long)tid, (long long)sort);
}

void cli_trace_slice_open(cli_trace *t, int64_t tid, const char *name, const char *cat, double begin,
                          double end) {
    if (!t->file) return;
    if (t->origin < 0.0) t->origin = begin;
    comma(t);
    fprintf(t->file,
            "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":1,\"tid\":%lld,\"ts\":%.3f,\"dur\":%.3f,"
            "\"args\":{",
            name, cat, (long long)tid, (begin - t->origin) * 1e6, (end - begin) * 1e6);
}

void cli_trace_slice_close(cli_trace *t) {
    if (t->file) fputs("}}", t->file);
}

void cli_trace_slice(cli_trace *t, int64_t tid, const char *name, const char *cat, double begin, double end,
                     const char *args) {
    if (!t->file) return;
    cli_trace_slice_open(t, tid, name, cat, begin, end);
    fputs(args ? args : "", t->file);
    cli_trace_slice_close(t);
}

void cli_trace_flow(cli_trace *t, int64_t tid, const char *name, const char *cat, int64_t id, double at,
                    int finish) {
    if (!t->file) return;
    if (t->origin < 0.0) t->origin = at;
    comma(t);
    fprintf(t->file,
            "{\"ph\":\"%s\",\"name\":\"%s\",\"cat\":\"%s\",\"id\":%lld,\"pid\":1,\"tid\":%lld,\"ts\":%.3f%s}",
            finish ? "f" : "s", name, cat, (long long)id, (long long)tid, (at - t->origin) * 1e6,
            finish ? ",\"bp\":\"e\"" : "");
}

void cli_trace_arrow(cli_trace *t, const char *name, const char *cat, int64_t from_tid, double from_begin,
                     double from_end, int64_t to_tid, double to) {
    if (!t->file) return;
    int64_t id = ++t->flows;
    cli_trace_flow(t, from_tid, name, cat, id, from_begin + 1e-3 * (from_end - from_begin), 0);
    cli_trace_flow(t, to_tid, name, cat, id, to, 1);
}

int cli_trace_close(cli_trace *t, const char *command, const char *path) {
    if (!t->file) return 0;
    fputs("\n]}\n", t->file);
    int rc = ferror(t->file) ? -1 : 0;
    if (fclose(t->file) != 0) rc = -1;
    t->file = NULL;
    if (rc && command) cli_error(command, "error writing the trace '%s'", path);
    return rc;
}
