/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_json.c: the JSON Lines writer of `--json` (see cli_json.h). */
#include "common/cli_json.h"

#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/cli_threads.h"
#include "common/cli_util.h"

static FILE *json_out; /* set by cli_json_redirect */

static void put_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void key(cli_json *j, const char *name) {
    if (j->fields++) fputc(',', j->out);
    put_string(j->out, name);
    fputc(':', j->out);
}

cli_json cli_json_begin(FILE *out, const char *type) {
    cli_json j = {out, 0};
    fputc('{', out);
    cli_json_str(&j, "type", type);
    return j;
}

void cli_json_str(cli_json *j, const char *name, const char *value) {
    key(j, name);
    if (value)
        put_string(j->out, value);
    else
        fputs("null", j->out);
}

void cli_json_num(cli_json *j, const char *name, double value) {
    key(j, name);
    if (isfinite(value))
        fprintf(j->out, "%.9g", value); /* 9 digits: every float32 and the table's precision and more */
    else
        fputs("null", j->out);
}

void cli_json_int(cli_json *j, const char *name, int64_t value) {
    key(j, name);
    fprintf(j->out, "%lld", (long long)value);
}

void cli_json_null(cli_json *j, const char *name) {
    key(j, name);
    fputs("null", j->out);
}

void cli_json_bool(cli_json *j, const char *name, int value) {
    key(j, name);
    fputs(value ? "true" : "false", j->out);
}

void cli_cpu_model(char *model, size_t size) {
    char line[512];
    model[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        snprintf(model, size, "%s", colon + (colon[1] == ' ' ? 2 : 1));
        model[strcspn(model, "\n")] = '\0';
        break;
    }
    if (f) fclose(f);
}

void cli_json_cpu(cli_json *j) {
    char model[256];
    cli_cpu_model(model, sizeof model);
    struct utsname u;
    cli_json_str(j, "cpu", model[0] ? model : uname(&u) == 0 ? u.machine : "unknown");
}

void cli_json_end(cli_json *j) {
    fputs("}\n", j->out);
    fflush(j->out);
}

int cli_json_redirect(const char *command) {
    fflush(stdout);
    int fd = dup(STDOUT_FILENO);
    int null_fd = open("/dev/null", O_WRONLY);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out || null_fd < 0 || dup2(null_fd, STDOUT_FILENO) < 0) {
        if (out)
            fclose(out);
        else if (fd >= 0)
            close(fd);
        if (null_fd >= 0) close(null_fd);
        cli_error(command, "--json: cannot set up the output streams");
        return -1;
    }
    close(null_fd);
    json_out = out;
    return 0;
}

FILE *cli_json_out(void) {
    return json_out;
}

cli_json cli_json_row(const char *type) {
    return cli_json_begin(json_out, type);
}

cli_json cli_json_header(const char *command, const char *key, const char *name) {
    char threads[160];
    cli_threads_describe(threads, sizeof threads);
    cli_json j = cli_json_row("header");
    cli_json_str(&j, "command", command);
    cli_json_str(&j, key, name);
    cli_json_cpu(&j);
    cli_json_str(&j, "threads", threads);
    return j;
}

void cli_json_time_row(const char *key, const char *name, cli_time_stats t, double gigabytes) {
    cli_json j = cli_json_row("row");
    cli_json_str(&j, key, name);
    cli_json_num(&j, "median_ms", t.median * 1e3);
    cli_json_num(&j, "min_ms", t.min * 1e3);
    cli_json_num(&j, "max_ms", t.max * 1e3);
    cli_json_num(&j, "gb_per_s", gigabytes / t.median);
    cli_json_end(&j);
}
