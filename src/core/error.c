/* SPDX-License-Identifier: Apache-2.0 */
/* core/error.c: status names and message formatting for mm_error. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *mm_status_name(mm_status status) {
    switch (status) {
    case MM_OK: return "ok";
    case MM_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case MM_ERR_INVALID_FILE: return "invalid_file";
    case MM_ERR_OUT_OF_MEMORY: return "out_of_memory";
    case MM_ERR_IO: return "io_error";
    case MM_ERR_UNSUPPORTED: return "unsupported";
    case MM_ERR_TIMEOUT: return "timeout";
    case MM_ERR_PEER: return "peer_failed";
    case MM_ERR_INTERNAL: return "internal_error";
    }
    return "unknown_status";
}

void mm_error_clear(mm_error *err) {
    if (err) {
        err->status = MM_OK;
        err->message[0] = '\0';
    }
}

int mm_status_is_input_error(mm_status status) {
    return status == MM_ERR_INVALID_ARGUMENT || status == MM_ERR_INVALID_FILE;
}

mm_status mm_failv(mm_error *err, mm_status status, const char *fmt, va_list ap) {
    if (err) {
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        err->status = status;
    }
    return status;
}

mm_status mm_fail(mm_error *err, mm_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mm_failv(err, status, fmt, ap);
    va_end(ap);
    return status;
}

mm_status mm_error_prefix(mm_error *err, const char *fmt, ...) {
    if (!err) return MM_ERR_INTERNAL;
    char prefix[MM_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* Build "prefix: message" by hand: snprintf of two full-size buffers into one would truncate. */
    char joined[MM_ERROR_MESSAGE_MAX];
    size_t np = strlen(prefix), nm = strlen(err->message), cap = sizeof joined - 1, at = 0;
    size_t take = np < cap ? np : cap;
    memcpy(joined, prefix, take);
    at = take;
    if (at + 2 <= cap) {
        memcpy(joined + at, ": ", 2);
        at += 2;
    }
    take = nm < cap - at ? nm : cap - at;
    memcpy(joined + at, err->message, take);
    at += take;
    joined[at] = '\0';
    memcpy(err->message, joined, at + 1);
    return err->status;
}
