/* SPDX-License-Identifier: Apache-2.0 */
/* io/io_util.c: quoting of untrusted text for messages, errno text, UTF-8 checks, a byte buffer. */
#include "io/io_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *mm_io_quote(char *buf, size_t cap, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t at = 0;
    if (cap == 0) return buf;
    size_t take = len > MM_IO_QUOTE_MAX ? MM_IO_QUOTE_MAX : len;
    for (size_t i = 0; i < take; i++) {
        unsigned char c = (unsigned char)s[i];
        char piece[4];
        size_t n = 0;
        if (c == '"' || c == '\\') {
            piece[n++] = '\\';
            piece[n++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            piece[n++] = (char)c;
        } else {
            piece[n++] = '\\';
            piece[n++] = 'x';
            piece[n++] = hex[c >> 4];
            piece[n++] = hex[c & 15];
        }
        if (at + n + 1 > cap) break;
        memcpy(buf + at, piece, n);
        at += n;
    }
    if (take < len && at + 4 <= cap) {
        memcpy(buf + at, "...", 3);
        at += 3;
    }
    buf[at] = '\0';
    return buf;
}

const char *mm_io_errno_text(int errnum, char *buf, size_t cap) {
    /* The library is built with _GNU_SOURCE, which selects the GNU strerror_r returning a pointer
     * that may or may not be buf. */
    const char *text = strerror_r(errnum, buf, cap);
    if (text != buf) snprintf(buf, cap, "%s", text ? text : "unknown error");
    return buf;
}

size_t mm_io_utf8_sequence_length(const unsigned char *s, size_t avail) {
    if (avail == 0) return 0;
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0; /* continuation byte, overlong lead 0xc0/0xc1, or beyond U+10FFFF */
    }
    if (avail < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (n == 3 && cp < 0x800) return 0;
    if (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) return 0;
    if (cp >= 0xd800 && cp <= 0xdfff) return 0;
    return n;
}

int mm_io_utf8_valid(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t at = 0;
    while (at < len) {
        size_t n = mm_io_utf8_sequence_length(u + at, len - at);
        if (n == 0) return 0;
        at += n;
    }
    return 1;
}

void mm_io_buffer_append(mm_io_buffer *b, const void *bytes, size_t n) {
    if (b->failed) return;
    if (n > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mm_io_buffer_append_str(mm_io_buffer *b, const char *s) {
    mm_io_buffer_append(b, s, strlen(s));
}

void mm_io_buffer_append_u64(mm_io_buffer *b, uint64_t v) {
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    mm_io_buffer_append(b, digits, (size_t)n);
}

void mm_io_buffer_append_json_string(mm_io_buffer *b, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    mm_io_buffer_append(b, "\"", 1);
    size_t run = 0; /* start of the pending run of bytes that need no escaping */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[6];
        size_t n = 0;
        switch (c) {
        case '"': n = 2, esc[0] = '\\', esc[1] = '"'; break;
        case '\\': n = 2, esc[0] = '\\', esc[1] = '\\'; break;
        case '\b': n = 2, esc[0] = '\\', esc[1] = 'b'; break;
        case '\f': n = 2, esc[0] = '\\', esc[1] = 'f'; break;
        case '\n': n = 2, esc[0] = '\\', esc[1] = 'n'; break;
        case '\r': n = 2, esc[0] = '\\', esc[1] = 'r'; break;
        case '\t': n = 2, esc[0] = '\\', esc[1] = 't'; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                n = 6;
            }
        }
        if (n) {
            mm_io_buffer_append(b, s + run, i - run);
            mm_io_buffer_append(b, esc, n);
            run = i + 1;
        }
    }
    mm_io_buffer_append(b, s + run, len - run);
    mm_io_buffer_append(b, "\"", 1);
}

void mm_io_buffer_free(mm_io_buffer *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}
