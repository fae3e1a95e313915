/* SPDX-License-Identifier: Apache-2.0 */
/* io/json.c: the strict JSON parser (see json.h). Recursive descent with an explicit depth limit;
 * every node, string and child list lives in one arena owned by the document, so a failure part-way
 * through frees everything with one call. */
#include "io/json.h"

#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/io_util.h"

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used;
    size_t cap;
    max_align_t data[];
} arena_chunk;

struct mm_json_doc {
    arena_chunk *chunks;
    const mm_json_value *root;
};

enum { ARENA_CHUNK_BYTES = 64 * 1024 };

static void *arena_alloc(mm_json_doc *doc, size_t size) {
    const size_t align = alignof(max_align_t);
    if (size > SIZE_MAX - align) return NULL;
    size = (size + align - 1) / align * align;
    arena_chunk *c = doc->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > ARENA_CHUNK_BYTES ? size : ARENA_CHUNK_BYTES;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = doc->chunks;
        c->used = 0;
        c->cap = cap;
        doc->chunks = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    return p;
}

void mm_json_doc_free(mm_json_doc *doc) {
    if (!doc) return;
    arena_chunk *c = doc->chunks;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc);
}

const mm_json_value *mm_json_doc_root(const mm_json_doc *doc) {
    return doc ? doc->root : NULL;
}

/* strtod depends on the process locale (a ',' decimal point would break "1.5"); parse in the C
 * locale, created once for the process. */
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale = (locale_t)0;
static void c_locale_init(void) {
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

typedef struct parser {
    const char *text;
    size_t len;
    size_t pos;
    int depth;
    mm_json_doc *doc;
    mm_error *err;
} parser;

static mm_status parse_error(parser *p, size_t at, const char *fmt, ...) MM_PRINTF(3, 4);
static mm_status parse_error(parser *p, size_t at, const char *fmt, ...) {
    char what[MM_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mm_fail(p->err, MM_ERR_INVALID_FILE, "JSON at byte %zu: %s", at, what);
}

static mm_status out_of_memory(parser *p) {
    return mm_fail(p->err, MM_ERR_OUT_OF_MEMORY, "JSON at byte %zu: out of memory", p->pos);
}

static void skip_whitespace(parser *p) {
    while (p->pos < p->len) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static mm_status unexpected(parser *p, const char *expected) {
    if (p->pos >= p->len) return parse_error(p, p->pos, "unexpected end of input, expected %s", expected);
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c >= 0x20 && c < 0x7f) return parse_error(p, p->pos, "unexpected '%c', expected %s", c, expected);
    return parse_error(p, p->pos, "unexpected byte 0x%02x, expected %s", c, expected);
}

static mm_json_value *new_value(parser *p, mm_json_type type, size_t offset) {
    mm_json_value *v = arena_alloc(p->doc, sizeof *v);
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    v->type = type;
    v->offset = offset;
    return v;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads the 4 hex digits of a \u escape starting at text[at]; -1 when malformed. */
static long read_hex4(const parser *p, size_t at) {
    if (at > p->len || p->len - at < 4) return -1;
    long v = 0;
    for (size_t i = 0; i < 4; i++) {
        int d = hex_digit(p->text[at + i]);
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *out, unsigned long cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Parses the string whose opening quote is at p->pos into decoded UTF-8 in the arena. */
static mm_status parse_string(parser *p, const char **chars, size_t *len) {
    size_t start = p->pos + 1, end = start;
    /* First find the closing quote, so the decoded text (never longer than the raw text) gets one
     * allocation. */
    while (end < p->len && p->text[end] != '"') end += p->text[end] == '\\' ? 2 : 1;
    if (end >= p->len) return parse_error(p, p->pos, "unterminated string");
    char *out = arena_alloc(p->doc, end - start + 1);
    if (!out) return out_of_memory(p);
    size_t n = 0, at = start;
    while (at < end) {
        unsigned char c = (unsigned char)p->text[at];
        if (c < 0x20) return parse_error(p, at, "control character 0x%02x in a string must be escaped", c);
        if (c >= 0x80) {
            size_t seq = mm_io_utf8_sequence_length((const unsigned char *)p->text + at, end - at);
            if (seq == 0) return parse_error(p, at, "invalid UTF-8 byte 0x%02x in a string", c);
            memcpy(out + n, p->text + at, seq);
            n += seq;
            at += seq;
            continue;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            at++;
            continue;
        }
        char e = p->text[at + 1];
        switch (e) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            long hi = read_hex4(p, at + 2);
            if (hi < 0 || at + 6 > end) return parse_error(p, at, "\\u must be followed by 4 hex digits");
            unsigned long cp = (unsigned long)hi;
            if (hi >= 0xdc00 && hi <= 0xdfff)
                return parse_error(p, at, "\\u%04lx is a low surrogate without a preceding high surrogate",
                                   (unsigned long)hi);
            if (hi >= 0xd800 && hi <= 0xdbff) {
                long lo = at + 12 <= end && p->text[at + 6] == '\\' && p->text[at + 7] == 'u'
                              ? read_hex4(p, at + 8)
                              : -1;
                if (lo < 0xdc00 || lo > 0xdfff)
                    return parse_error(p, at,
                                       "\\u%04lx is a high surrogate not followed by a \\u low surrogate",
                                       (unsigned long)hi);
                cp = 0x10000 + (((unsigned long)hi - 0xd800) << 10) + ((unsigned long)lo - 0xdc00);
                at += 6;
            }
            n += put_utf8(out + n, cp);
            at += 6;
            continue;
        }
        default:
            if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f)
                return parse_error(p, at, "invalid escape '\\%c'", e);
            return parse_error(p, at, "invalid escape: '\\' followed by byte 0x%02x", (unsigned char)e);
        }
        at += 2;
    }
    out[n] = '\0';
    *chars = out;
    *len = n;
    p->pos = end + 1;
    return MM_OK;
}

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* Moves *at past the digits there, of which there must be at least one (else "expected <what>"). */
static mm_status skip_digits(parser *p, size_t *at, const char *what) {
    if (*at >= p->len || !is_digit(p->text[*at])) {
        p->pos = *at;
        return unexpected(p, what);
    }
    while (*at < p->len && is_digit(p->text[*at])) (*at)++;
    return MM_OK;
}

static mm_status parse_number(parser *p, mm_json_value *v) {
    size_t start = p->pos, at = p->pos;
    mm_json_number *num = &v->u.number;
    num->is_integer = 1;
    if (at < p->len && p->text[at] == '-') {
        num->negative = 1;
        at++;
    }
    if (at >= p->len || !is_digit(p->text[at])) {
        p->pos = at;
        return unexpected(p, "a digit");
    }
    if (p->text[at] == '0' && at + 1 < p->len && is_digit(p->text[at + 1]))
        return parse_error(p, at, "numbers must not have leading zeros");
    while (at < p->len && is_digit(p->text[at])) {
        unsigned d = (unsigned)(p->text[at] - '0');
        if (num->magnitude > (UINT64_MAX - d) / 10)
            num->magnitude_overflow = 1;
        else
            num->magnitude = num->magnitude * 10 + d;
        at++;
    }
    if (at < p->len && p->text[at] == '.') {
        num->is_integer = 0;
        at++;
        mm_status st = skip_digits(p, &at, "a digit after the decimal point");
        if (st != MM_OK) return st;
    }
    if (at < p->len && (p->text[at] == 'e' || p->text[at] == 'E')) {
        num->is_integer = 0;
        at++;
        if (at < p->len && (p->text[at] == '+' || p->text[at] == '-')) at++;
        mm_status st = skip_digits(p, &at, "a digit in the exponent");
        if (st != MM_OK) return st;
    }
    /* strtod needs a NUL-terminated copy: the text is not terminated and may be long. */
    size_t n = at - start;
    char small[64];
    char *copy = n < sizeof small ? small : malloc(n + 1);
    if (!copy) return out_of_memory(p);
    memcpy(copy, p->text + start, n);
    copy[n] = '\0';
    pthread_once(&c_locale_once, c_locale_init);
    errno = 0;
    double real = c_locale ? strtod_l(copy, NULL, c_locale) : strtod(copy, NULL);
    num->real = real;
    num->real_overflow = errno == ERANGE && (real > 1.0 || real < -1.0);
    if (copy != small) free(copy);
    p->pos = at;
    return MM_OK;
}

static mm_status parse_value(parser *p, const mm_json_value **out);

/* Growable list of pointers used while a container is open; copied into the arena when it closes. */
typedef struct ptr_list {
    void **items;
    size_t count, cap;
} ptr_list;

static int ptr_list_push(ptr_list *l, void *item) {
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        void **grown = realloc(l->items, cap * sizeof *grown);
        if (!grown) return 0;
        l->items = grown;
        l->cap = cap;
    }
    l->items[l->count++] = item;
    return 1;
}

static int compare_members(const void *a, const void *b) {
    const mm_json_member *x = *(const mm_json_member *const *)a, *y = *(const mm_json_member *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Duplicate keys are rejected (the format gives them no meaning): sort a copy of the key list. */
static mm_status check_duplicate_keys(parser *p, mm_json_member *members, size_t count, size_t offset) {
    if (count < 2) return MM_OK;
    mm_json_member **sorted = malloc(count * sizeof *sorted);
    if (!sorted) return out_of_memory(p);
    for (size_t i = 0; i < count; i++) sorted[i] = &members[i];
    qsort(sorted, count, sizeof *sorted, compare_members);
    mm_status st = MM_OK;
    for (size_t i = 1; i < count; i++) {
        if (compare_members(&sorted[i - 1], &sorted[i]) == 0) {
            char q[MM_IO_QUOTE_BUF];
            st = parse_error(p, offset, "duplicate key \"%s\" in object",
                             mm_io_quote(q, sizeof q, sorted[i]->key, sorted[i]->key_len));
            break;
        }
    }
    free(sorted);
    return st;
}

/* After an item of an object or array: ',' means another item follows (*more = 1), the closing
 * bracket ends the container (*more = 0); both are consumed. Anything else is the error `expected`. */
static mm_status after_item(parser *p, char close, const char *expected, int *more) {
    skip_whitespace(p);
    if (p->pos < p->len && (p->text[p->pos] == ',' || p->text[p->pos] == close)) {
        *more = p->text[p->pos] == ',';
        p->pos++;
        return MM_OK;
    }
    return unexpected(p, expected);
}

/* Steps over the opening '{' or '[' and the white space after it; 1 when the container is empty (its
 * `close` is then consumed too), else 0. */
static int open_container(parser *p, char close) {
    p->pos++;
    skip_whitespace(p);
    if (p->pos < p->len && p->text[p->pos] == close) {
        p->pos++;
        return 1;
    }
    return 0;
}

static mm_status parse_object(parser *p, mm_json_value *v) {
    mm_status st = MM_OK;
    ptr_list keys = {0}; /* alternating: key value node (string), member value */
    if (open_container(p, '}')) return MM_OK;
    for (;;) {
        skip_whitespace(p);
        if (p->pos >= p->len || p->text[p->pos] != '"') {
            st = unexpected(p, "a string key");
            goto done;
        }
        mm_json_member *m = arena_alloc(p->doc, sizeof *m);
        if (!m) {
            st = out_of_memory(p);
            goto done;
        }
        if ((st = parse_string(p, &m->key, &m->key_len)) != MM_OK) goto done;
        skip_whitespace(p);
        if (p->pos >= p->len || p->text[p->pos] != ':') {
            st = unexpected(p, "':' after an object key");
            goto done;
        }
        p->pos++;
        if ((st = parse_value(p, &m->value)) != MM_OK) goto done;
        if (!ptr_list_push(&keys, m)) {
            st = out_of_memory(p);
            goto done;
        }
        int more = 0;
        if ((st = after_item(p, '}', "',' or '}' in an object", &more)) != MM_OK) goto done;
        if (!more) break;
    }
    mm_json_member *members = arena_alloc(p->doc, keys.count * sizeof *members);
    if (!members) {
        st = out_of_memory(p);
        goto done;
    }
    for (size_t i = 0; i < keys.count; i++) members[i] = *(mm_json_member *)keys.items[i];
    v->u.object.members = members;
    v->u.object.count = keys.count;
    st = check_duplicate_keys(p, members, keys.count, v->offset);
done:
    free(keys.items);
    return st;
}

static mm_status parse_array(parser *p, mm_json_value *v) {
    mm_status st = MM_OK;
    ptr_list items = {0};
    if (open_container(p, ']')) return MM_OK;
    for (;;) {
        const mm_json_value *item = NULL;
        if ((st = parse_value(p, &item)) != MM_OK) goto done;
        if (!ptr_list_push(&items, (void *)item)) {
            st = out_of_memory(p);
            goto done;
        }
        int more = 0;
        if ((st = after_item(p, ']', "',' or ']' in an array", &more)) != MM_OK) goto done;
        if (!more) break;
    }
    const mm_json_value **list = arena_alloc(p->doc, items.count * sizeof *list);
    if (!list) {
        st = out_of_memory(p);
        goto done;
    }
    for (size_t i = 0; i < items.count; i++) list[i] = items.items[i];
    v->u.array.items = list;
    v->u.array.count = items.count;
done:
    free(items.items);
    return st;
}

static mm_status parse_keyword(parser *p, const char *word, mm_json_value *v) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->text + p->pos, word, n) != 0)
        return parse_error(p, p->pos, "invalid literal (expected %s)", word);
    if (word[0] == 't') v->u.boolean = 1;
    p->pos += n;
    return MM_OK;
}

static mm_status parse_value(parser *p, const mm_json_value **out) {
    skip_whitespace(p);
    if (p->pos >= p->len) return unexpected(p, "a value");
    char c = p->text[p->pos];
    mm_json_type type;
    switch (c) {
    case '{': type = MM_JSON_OBJECT; break;
    case '[': type = MM_JSON_ARRAY; break;
    case '"': type = MM_JSON_STRING; break;
    case 't':
    case 'f': type = MM_JSON_BOOL; break;
    case 'n': type = MM_JSON_NULL; break;
    default:
        if (c != '-' && !is_digit(c)) return unexpected(p, "a value");
        type = MM_JSON_NUMBER;
    }
    mm_json_value *v = new_value(p, type, p->pos);
    if (!v) return out_of_memory(p);
    mm_status st = MM_OK;
    switch (type) {
    case MM_JSON_OBJECT:
    case MM_JSON_ARRAY:
        if (p->depth >= MM_JSON_MAX_DEPTH)
            return parse_error(p, p->pos, "nesting deeper than %d levels", MM_JSON_MAX_DEPTH);
        p->depth++;
        st = type == MM_JSON_OBJECT ? parse_object(p, v) : parse_array(p, v);
        p->depth--;
        break;
    case MM_JSON_STRING: st = parse_string(p, &v->u.string.chars, &v->u.string.len); break;
    case MM_JSON_BOOL: st = parse_keyword(p, c == 't' ? "true" : "false", v); break;
    case MM_JSON_NULL: st = parse_keyword(p, "null", v); break;
    case MM_JSON_NUMBER: st = parse_number(p, v); break;
    }
    if (st == MM_OK) *out = v;
    return st;
}

mm_status mm_json_parse(const char *text, size_t len, mm_json_doc **out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_json_parse: out is NULL");
    *out = NULL;
    if (!text && len) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_json_parse: text is NULL");
    mm_json_doc *doc = calloc(1, sizeof *doc);
    if (!doc) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "JSON: out of memory");
    parser p = {.text = text, .len = len, .doc = doc, .err = err};
    mm_status st = parse_value(&p, &doc->root);
    if (st != MM_OK) goto fail;
    skip_whitespace(&p);
    if (p.pos != len) {
        st = unexpected(&p, "the end of input after the JSON value");
        goto fail;
    }
    *out = doc;
    return MM_OK;
fail:
    mm_json_doc_free(doc);
    return st;
}
