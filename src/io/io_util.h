/* SPDX-License-Identifier: Apache-2.0 */
/* io/io_util.h: small helpers shared by the JSON parser and the safetensors reader/writer.
 *
 * They exist so that every error message quotes untrusted text the same safe way (bounded length,
 * non-printable bytes escaped), so that UTF-8 is validated by one function, and so that the header
 * text is built in one growable buffer with one failure path. */
#ifndef MEGAMOE_IO_UTIL_H
#define MEGAMOE_IO_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/status.h"

/* Longest excerpt of untrusted text quoted into an error message. */
#define MM_IO_QUOTE_MAX 80

/* Writes s[0..len) into buf as printable ASCII (non-printable bytes as \xHH, '"' and '\\' escaped),
 * cut with "..." when longer than MM_IO_QUOTE_MAX. Always NUL-terminates. Returns buf. */
char *mm_io_quote(char *buf, size_t cap, const char *s, size_t len);
/* Buffer size that always suffices for mm_io_quote. */
#define MM_IO_QUOTE_BUF (MM_IO_QUOTE_MAX * 4 + 8)

/* Thread-safe description of an errno value (strerror_r), written into buf. Returns buf. */
const char *mm_io_errno_text(int errnum, char *buf, size_t cap);

/* Length in bytes (1..4) of the valid UTF-8 sequence at s[0..avail), or 0 when it is invalid
 * (truncated, overlong, a surrogate, above U+10FFFF, or a stray continuation byte). */
size_t mm_io_utf8_sequence_length(const unsigned char *s, size_t avail);
/* 1 when s[0..len) is entirely valid UTF-8. */
int mm_io_utf8_valid(const char *s, size_t len);

/* A growable byte buffer; `failed` latches the first allocation failure so callers check once. */
typedef struct mm_io_buffer {
    char *data;
    size_t len;
    size_t cap;
    int failed;
} mm_io_buffer;

void mm_io_buffer_append(mm_io_buffer *b, const void *bytes, size_t n);
void mm_io_buffer_append_str(mm_io_buffer *b, const char *s);
void mm_io_buffer_append_u64(mm_io_buffer *b, uint64_t v);
/* Appends s as a JSON string literal (with quotes), escaping '"', '\\' and control characters. */
void mm_io_buffer_append_json_string(mm_io_buffer *b, const char *s, size_t len);
void mm_io_buffer_free(mm_io_buffer *b);

#endif
