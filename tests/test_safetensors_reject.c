/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_safetensors_reject.c: the reader's rejection rules, one hand-built file per rule (the
 * header is written as a string here, independently of the writer), truncation at every prefix of a
 * valid file, and random corruption under a fixed seed (which AddressSanitizer watches). */
#include <stdlib.h>
#include <unistd.h>

#include "megamoe/safetensors.h"
#include "testlib.h"

/* A file image: 8-byte little-endian header length, the header, then data_len data bytes (0, 1, ...). */
typedef struct image {
    unsigned char *bytes;
    size_t size;
} image;

static image build_n(const char *header, size_t n, size_t data_len) {
    image im = {malloc(8 + n + data_len + 1), 8 + n + data_len};
    for (int i = 0; i < 8; i++) im.bytes[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(im.bytes + 8, header, n);
    for (size_t i = 0; i < data_len; i++) im.bytes[8 + n + i] = (unsigned char)i;
    return im;
}

static image build(const char *header, size_t data_len) {
    return build_n(header, strlen(header), data_len);
}

static mm_status open_image(const image *im, mm_st_reader **r, mm_error *err) {
    mm_error_clear(err);
    return mm_st_open_memory(im->bytes, im->size, r, err);
}

static void expect_reject(const char *header, size_t data_len, const char *needle) {
    image im = build(header, data_len);
    mm_st_reader *r = NULL;
    mm_error err_store, *err = &err_store;
    CHECK_STATUS(open_image(&im, &r, err), MM_ERR_INVALID_FILE, err);
    CHECK(r == NULL);
    CHECK_STR_CONTAINS(err->message, needle);
    mm_st_close(r);
    free(im.bytes);
}

static mm_st_reader *expect_accept(const char *header, size_t data_len) {
    image im = build(header, data_len);
    mm_st_reader *r = NULL;
    mm_error err_store, *err = &err_store;
    CHECK_OK(open_image(&im, &r, err), err);
    free(im.bytes);
    return r;
}

static void test_container_rules(void) {
    mm_st_reader *r = NULL;
    mm_error err_store, *err = &err_store;
    unsigned char tiny[5] = {1, 0, 0, 0, 0};
    CHECK_STATUS(mm_st_open_memory(tiny, sizeof tiny, &r, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "file has 5 bytes, fewer than the 8-byte header length");

    unsigned char huge[16] = {0};
    uint64_t n = 100ull * 1024 * 1024 + 1;
    for (int i = 0; i < 8; i++) huge[i] = (unsigned char)(n >> (8 * i));
    CHECK_STATUS(mm_st_open_memory(huge, sizeof huge, &r, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "header length 104857601 exceeds the limit of 104857600 bytes");
    memset(huge, 0xff, 8); /* 2^64 - 1: must not wrap around in 8 + n */
    CHECK_STATUS(mm_st_open_memory(huge, sizeof huge, &r, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "exceeds the limit");
    memset(huge, 0, 8);
    huge[0] = 9; /* 9 > 16 - 8 */
    CHECK_STATUS(mm_st_open_memory(huge, sizeof huge, &r, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "header length 9 exceeds the 8 bytes that follow the length field");

    expect_reject("", 0, "header does not start with '{'");
    expect_reject(" {}", 0, "header does not start with '{'");
    expect_reject("[]", 0, "header does not start with '{'");
    expect_reject("{\"a\":}", 0, "header: JSON at byte 5: unexpected '}', expected a value");
    expect_reject("{} x", 0, "header: JSON at byte 3: unexpected 'x', expected the end of input");
    image nul_padded = build_n("{}\0\0\0\0\0\0", 8, 0); /* padding must be spaces, not NULs */
    CHECK_STATUS(open_image(&nul_padded, &r, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message,
                       "header: JSON at byte 2: unexpected byte 0x00, expected the end of input");
    free(nul_padded.bytes);
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                  "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                  2, "duplicate key \"a\"");
}

static void test_metadata_rules(void) {
    expect_reject("{\"__metadata__\":[]}", 0, "__metadata__ is an array, must be an object of strings");
    expect_reject("{\"__metadata__\":{\"op\":1}}", 0,
                  "__metadata__ \"op\" is a number, metadata values must be strings");
    expect_reject("{\"__metadata__\":{\"op\":null}}", 0, "__metadata__ \"op\" is null");
    expect_reject("{\"__metadata__\":{\"o\\u0000p\":\"x\"}}", 0, "contains a NUL character");
    expect_reject("{\"__metadata__\":{\"op\":\"x\\u0000\"}}", 0, "contains a NUL character");
    mm_st_reader *r = expect_accept("{\"__metadata__\":{\"zeta\":\"1\",\"alpha\":\"a\\\"b\"}}", 0);
    if (r) {
        CHECK_EQ_INT(mm_st_metadata_count(r), 2);
        const char *k = NULL, *v = NULL;
        mm_st_metadata_at(r, 0, &k, &v); /* sorted by key */
        CHECK(k && strcmp(k, "alpha") == 0 && strcmp(v, "a\"b") == 0);
        mm_st_metadata_at(r, 1, &k, &v);
        CHECK(k && strcmp(k, "zeta") == 0 && strcmp(v, "1") == 0);
        mm_st_metadata_at(r, 2, &k, &v);
        CHECK(k == NULL && v == NULL);
        CHECK(strcmp(mm_st_metadata(r, "zeta"), "1") == 0);
        CHECK(mm_st_metadata(r, "missing") == NULL);
        CHECK_EQ_INT(mm_st_tensor_count(r), 0);
    }
    mm_st_close(r);
}

static void test_entry_rules(void) {
    expect_reject("{\"a\":1}", 0, "tensor \"a\": entry is a number, must be an object");
    expect_reject("{\"a\\u0000b\":{}}", 0, "tensor \"a\\x00b\": the name contains a NUL character");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"extra\":1}}", 1,
                  "tensor \"a\": unknown field \"extra\" (allowed: dtype, shape, data_offsets)");
    expect_reject("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  "tensor \"a\": missing field \"dtype\"");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"dtype\\u0000x\":1,\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  "tensor \"a\": unknown field \"dtype\\x00x\"");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1,
                  "tensor \"a\": missing field \"shape\"");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1,
                  "tensor \"a\": missing field \"data_offsets\"");
    expect_reject("{\"a\":{\"dtype\":8,\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  "tensor \"a\": dtype is a number, must be a string");
    expect_reject("{\"a\":{\"dtype\":\"u8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  "tensor \"a\": unknown dtype \"u8\"");
    expect_reject("{\"a\":{\"dtype\":\"int4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  "unknown dtype \"int4\"");
    expect_reject("{\"a\":{\"dtype\":\"U8\\u0000\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  "unknown dtype");
    /* shape */
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", 1,
                  "tensor \"a\": shape is a number, must be a list of integers");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
                  "tensor \"a\": shape has 9 dimensions, at most 8 are allowed");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1,
                  "tensor \"a\": shape[0] is negative");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1.0],\"data_offsets\":[0,1]}}", 1,
                  "tensor \"a\": shape[1] is not an integer");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1e0],\"data_offsets\":[0,1]}}", 1,
                  "shape[0] is not an integer");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[\"1\"],\"data_offsets\":[0,1]}}", 1,
                  "shape[0] is a string, not an integer");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775808],\"data_offsets\":[0,1]}}", 1,
                  "shape[0] is outside the 64-bit integer range");
    /* data_offsets */
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1,
                  "tensor \"a\": data_offsets must be a list of 2 integers");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 1,
                  "list of 2 integers");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":{}}}", 1, "list of 2 integers");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-0,1]}}", 1,
                  "tensor \"a\": data_offsets[0] is negative");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.0]}}", 1,
                  "tensor \"a\": data_offsets[1] is not an integer");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,2]}}", 1,
                  "tensor \"a\": data_offsets[1] is beyond the end of the 1-byte data region");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999999]}}", 1,
                  "data_offsets[1] is beyond the end");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[1,0]}}", 1,
                  "tensor \"a\": data_offsets [1, 0] has begin > end");
    /* Byte span against shape x dtype size. */
    expect_reject(
        "{\"rank0.x\":{\"dtype\":\"BF16\",\"shape\":[4,16],\"data_offsets\":[0,100]}}", 100,
        "tensor \"rank0.x\": data_offsets [0, 100] span 100 bytes but shape [4, 16] of BF16 needs 128");
    expect_reject("{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,4]}}", 4,
                  "tensor \"s\": data_offsets [0, 4] span 4 bytes but shape [] of F64 needs 8");
    expect_reject("{\"f\":{\"dtype\":\"F4\",\"shape\":[3,5],\"data_offsets\":[0,8]}}", 8,
                  "span 8 bytes but shape [3, 5] of F4 needs 9"); /* rows x ceil(5/2) */
    expect_reject("{\"e\":{\"dtype\":\"I32\",\"shape\":[0,5],\"data_offsets\":[0,1]}}", 1,
                  "shape [0, 5] of I32 needs 0");
    expect_reject("{\"o\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,0]}}", 0,
                  "tensor \"o\": shape [4294967296, 4294967296, 4] of F32 has a byte size beyond 64 bits");
    expect_reject("{\"o\":{\"dtype\":\"U8\",\"shape\":[9223372036854775807,9223372036854775807,0],"
                  "\"data_offsets\":[0,0]}}",
                  0, "beyond 64 bits"); /* the product overflows before the 0 */
    /* Every standard dtype string is known, with its size. */
    static const struct {
        const char *name;
        int bytes;
    } sizes[] = {{"BOOL", 1}, {"U8", 1},      {"I8", 1},      {"I16", 2},    {"I32", 4},
                 {"I64", 8},  {"U64", 8},     {"F16", 2},     {"BF16", 2},   {"F32", 4},
                 {"F64", 8},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char header[160];
        snprintf(header, sizeof header, "{\"t\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[0,%d]}}",
                 sizes[i].name, 3 * sizes[i].bytes);
        mm_st_reader *r = expect_accept(header, (size_t)(3 * sizes[i].bytes));
        const mm_st_tensor_info *t = mm_st_find(r, "t");
        CHECK(t && t->nbytes == (uint64_t)(3 * sizes[i].bytes) && t->ndim == 1 && t->shape[0] == 3);
        CHECK(t && t->dtype == mm_dtype_from_name(sizes[i].name));
        mm_st_close(r);
    }
}

static void test_tiling_rules(void) {
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
                  12, "tensor \"b\": data_offsets [4, 12] overlap tensor \"a\" [0, 8]");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
                  12, "tensor \"b\": data_offsets [8, 12] leave bytes [4, 8) of the data region unused");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8,
                  "tensor \"a\": data_offsets [4, 8] leave bytes [0, 4)");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 8,
                  "data region has 8 bytes but the tensors cover only [0, 4)");
    expect_reject("{}", 3, "data region has 3 bytes but the tensors cover only [0, 0)");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                  4, "overlap");

    /* Accepted: entries in any JSON order (sorted by offset), empty tensors anywhere, padding spaces. */
    const char *header = "{\"b\":{\"shape\":[2],\"dtype\":\"U8\",\"data_offsets\":[4,6]},"
                         "\"z\":{\"dtype\":\"I32\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
                         "\"a\":{\"data_offsets\":[0,4],\"dtype\":\"I16\",\"shape\":[2]},"
                         "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[6,6]}}    \n  ";
    mm_st_reader *r = expect_accept(header, 6);
    CHECK_EQ_INT(mm_st_tensor_count(r), 4);
    const char *order[4] = {"a", "z", "b", "e"};
    for (size_t i = 0; i < 4 && r; i++) {
        const mm_st_tensor_info *t = mm_st_tensor_at(r, i);
        CHECK(t && strcmp(t->name, order[i]) == 0);
    }
    const mm_st_tensor_info *b = mm_st_find(r, "b");
    CHECK(b && b->offset == 8 + strlen(header) + 4 && b->nbytes == 2);
    unsigned char got[2] = {0};
    mm_error err_store, *err = &err_store;
    if (b) CHECK_OK(mm_st_read(r, b, got, err), err);
    CHECK(got[0] == 4 && got[1] == 5);
    CHECK(mm_st_tensor_at(r, 4) == NULL);
    mm_st_close(r);
}

static void test_logical_dtype_rules(void) {
    const char *u8_2x4 = "\"x\":{\"dtype\":\"U8\",\"shape\":[2,4],\"data_offsets\":[0,8]}";
    char header[512];
#define WITH_META(meta) (snprintf(header, sizeof header, "{\"__metadata__\":{%s},%s}", meta, u8_2x4), header)
    mm_st_reader *r = expect_accept(WITH_META("\"dtype.x\":\"int4\",\"shape.x\":\"[2, 7]\""), 8);
    const mm_st_tensor_info *x = mm_st_find(r, "x");
    CHECK(x && x->dtype == MM_DTYPE_INT4 && x->ndim == 2 && x->shape[0] == 2 && x->shape[1] == 7 &&
          x->nbytes == 8);
    mm_st_close(r);
    r = expect_accept(WITH_META("\"dtype.x\":\"fp4_e1m2\",\"shape.x\":\"[2,8]\""), 8);
    x = mm_st_find(r, "x");
    CHECK(x && x->dtype == MM_DTYPE_FP4_E1M2 && x->shape[1] == 8);
    mm_st_close(r);
    r = expect_accept(WITH_META("\"dtype.x\":\"hifloat8\""), 8);
    x = mm_st_find(r, "x");
    CHECK(x && x->dtype == MM_DTYPE_HIFLOAT8 && x->shape[0] == 2 && x->shape[1] == 4);
    mm_st_close(r);

    /* each: the metadata, and the message expected */
    static const char *const rejected[][2] = {
        {"\"dtype.y\":\"int4\"", "metadata \"dtype.y\" names no tensor \"y\""},
        {"\"dtype.x\":\"int8\"",
         "metadata \"dtype.x\" = \"int8\" is not a logical dtype (int4, uint4, fp4_e1m2, hifloat8)"},
        {"\"dtype.x\":\"int4\"", "tensor \"x\": dtype int4 needs metadata \"shape.x\""},
        {"\"shape.x\":\"[2,7]\"", "metadata \"shape.x\" needs \"dtype.x\" to be int4, uint4 or fp4_e1m2"},
        {"\"dtype.x\":\"hifloat8\",\"shape.x\":\"[2,4]\"", "needs \"dtype.x\" to be int4"},
        {"\"dtype.x\":\"int4\",\"shape.x\":\"[2,9]\"",
         "tensor \"x\": stored U8 shape [2, 4] does not hold int4 shape [2, 9]"},
        {"\"dtype.x\":\"int4\",\"shape.x\":\"[3,7]\"", "does not hold int4 shape [3, 7]"},
        {"\"dtype.x\":\"int4\",\"shape.x\":\"[14]\"", "does not hold int4 shape [14]"},
        {"\"dtype.x\":\"int4\",\"shape.x\":\"[2,\"",
         "metadata \"shape.x\": JSON at byte 3: unexpected end of input"},
        {"\"dtype.x\":\"int4\",\"shape.x\":\"[2,-7]\"", "metadata \"shape.x\"[1] is negative"},
        {"\"dtype.x\":\"int4\",\"shape.x\":\"{}\"",
         "metadata \"shape.x\" is an object, must be a list of integers"},
    };
    for (size_t i = 0; i < sizeof rejected / sizeof rejected[0]; i++)
        expect_reject(WITH_META(rejected[i][0]), 8, rejected[i][1]);
#undef WITH_META
    expect_reject("{\"__metadata__\":{\"dtype.x\":\"int4\",\"shape.x\":\"[8]\"},"
                  "\"x\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                  4, "tensor \"x\": metadata \"dtype.x\" = \"int4\" needs the stored dtype U8, not I8");
    /* A 0-d int4 is one stored byte; its logical shape is []. */
    r = expect_accept("{\"__metadata__\":{\"dtype.s\":\"int4\",\"shape.s\":\"[]\"},"
                      "\"s\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",
                      1);
    x = mm_st_find(r, "s");
    CHECK(x && x->dtype == MM_DTYPE_INT4 && x->ndim == 0 && x->nbytes == 1);
    mm_st_close(r);
}

/* A valid file with several dtypes, metadata and a logical tensor, built by hand. */
static const char valid_header[] =
    "{\"__metadata__\":{\"op\":\"moe_re_routing\",\"dtype.w\":\"int4\",\"shape.w\":\"[2,3]\"},"
    "\"tokens\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
    "\"w\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[12,16]},"
    "\"n\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[16,24]},"
    "\"f\":{\"dtype\":\"F4\",\"shape\":[1,3],\"data_offsets\":[24,26]}}  ";

static image valid_image(void) {
    return build(valid_header, 26);
}

/* Whatever opened must be self-consistent: every tensor inside the file, its byte count matching its
 * logical shape, the tensors tiling the data region, every lookup and read working. */
static void check_consistent(mm_st_reader *r, size_t file_size) {
    size_t count = mm_st_tensor_count(r);
    uint64_t total = 0, first = count ? mm_st_tensor_at(r, 0)->offset : 0;
    for (size_t i = 0; i < count; i++) {
        const mm_st_tensor_info *t = mm_st_tensor_at(r, i);
        mm_tensor d = mm_tensor_make(t->dtype, t->ndim, t->shape, NULL);
        CHECK(t->offset >= 8 && t->offset + t->nbytes <= file_size);
        CHECK_EQ_INT(mm_tensor_nbytes(&d), (int64_t)t->nbytes);
        CHECK(mm_st_find(r, t->name) == t);
        total += t->nbytes;
        mm_tensor out;
        mm_error err_store, *err = &err_store;
        CHECK_OK(mm_st_read_tensor(r, t->name, &out, err), err);
        mm_tensor_free_data(&out);
    }
    CHECK(count == 0 || first + total == file_size);
    for (size_t i = 0; i < mm_st_metadata_count(r); i++) {
        const char *k, *v;
        mm_st_metadata_at(r, i, &k, &v);
        CHECK(k && v && mm_st_metadata(r, k) == v);
    }
}

static void test_truncation(void) {
    image im = valid_image();
    mm_st_reader *r = NULL;
    mm_error err_store, *err = &err_store;
    CHECK_OK(mm_st_open_memory(im.bytes, im.size, &r, err), err);
    check_consistent(r, im.size);
    mm_st_close(r);
    int all_rejected = 1;
    for (size_t len = 0; len < im.size; len++) {
        r = NULL;
        mm_status st = mm_st_open_memory(im.bytes, len, &r, err);
        if (st != MM_ERR_INVALID_FILE || r != NULL) all_rejected = 0;
        mm_st_close(r);
    }
    CHECK(all_rejected);
    /* The same through the file path (pread), for a few prefixes. */
    char path[] = "/tmp/megamoe_test_trunc_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    size_t prefixes[] = {0, 5, 8, 9, 100, im.size - 1, im.size};
    for (size_t i = 0; fd >= 0 && i < sizeof prefixes / sizeof prefixes[0]; i++) {
        CHECK(ftruncate(fd, 0) == 0);
        CHECK(pwrite(fd, im.bytes, prefixes[i], 0) == (ssize_t)prefixes[i]);
        r = NULL;
        mm_status st = mm_st_open(path, &r, err);
        CHECK_STATUS(st, prefixes[i] == im.size ? MM_OK : MM_ERR_INVALID_FILE, err);
        if (st == MM_ERR_INVALID_FILE)
            CHECK_STR_CONTAINS(err->message, path); /* content errors name the file */
        if (r) check_consistent(r, im.size);
        mm_st_close(r);
    }
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    free(im.bytes);
}

static void test_random_corruption(void) {
    image im = valid_image();
    unsigned char *copy = malloc(im.size);
    uint64_t seed = 0x5afe7e115ull;
    int opened = 0, rejected = 0, other = 0;
    for (int iter = 0; iter < 4000; iter++) {
        memcpy(copy, im.bytes, im.size);
        int flips = 1 + (int)(mm_test_rand_u64(&seed) % 4);
        for (int f = 0; f < flips; f++) {
            /* Mostly the header (where the parser lives), sometimes the length field or the data. */
            uint64_t pick = mm_test_rand_u64(&seed);
            size_t at = pick % 8 == 0 ? (size_t)(pick >> 8) % 8 : (size_t)(pick >> 8) % im.size;
            uint64_t how = mm_test_rand_u64(&seed);
            static const char tokens[] = "{}[]\",:0123456789-.eE \\u";
            copy[at] =
                how % 2 ? (unsigned char)(how >> 8) : (unsigned char)tokens[(how >> 8) % (sizeof tokens - 1)];
        }
        size_t len = mm_test_rand_u64(&seed) % 8 == 0 ? (size_t)(mm_test_rand_u64(&seed) % im.size) : im.size;
        mm_st_reader *r = NULL;
        mm_error err_store, *err = &err_store;
        mm_error_clear(err);
        mm_status st = mm_st_open_memory(copy, len, &r, err);
        if (st == MM_OK) {
            opened++;
            check_consistent(r, len);
        } else if (st == MM_ERR_INVALID_FILE && err->message[0] != '\0' && r == NULL) {
            rejected++;
        } else {
            other++;
            mm_test_report_fail(__FILE__, __LINE__, "corruption %d: status %s (%s)", iter, mm_status_name(st),
                                err->message);
        }
        mm_st_close(r);
    }
    CHECK_EQ_INT(other, 0);
    CHECK(rejected > 1000); /* the corruption reaches the checks ... */
    CHECK(opened > 10);     /* ... and some corruptions (data bytes, padding) stay valid */
    printf("random corruption: %d opened, %d rejected\n", opened, rejected);
    free(copy);
    free(im.bytes);
}

/* Edits of the header text with the length field kept right, so that the corruption gets past the
 * JSON syntax into the entry, tiling and logical-dtype rules: digits changed, characters deleted,
 * tokens inserted. */
static void test_structural_corruption(void) {
    static const char tokens[] = "0123456789012345678901234567890123456789,[]{}\" -.e";
    size_t n = sizeof valid_header - 1;
    char *text = malloc(n + 8);
    uint64_t seed = 0xc0ffee;
    int opened = 0, rejected = 0;
    for (int iter = 0; iter < 4000; iter++) {
        memcpy(text, valid_header, n);
        size_t len = n;
        int edits = 1 + (int)(mm_test_rand_u64(&seed) % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(mm_test_rand_u64(&seed) % len);
            char c = tokens[mm_test_rand_u64(&seed) % (sizeof tokens - 1)];
            switch (mm_test_rand_u64(&seed) % 3) {
            case 0: text[at] = c; break;
            case 1:
                memmove(text + at, text + at + 1, len - at - 1);
                len--;
                break;
            default:
                memmove(text + at + 1, text + at, len - at);
                text[at] = c;
                len++;
            }
        }
        image im = build_n(text, len, 26);
        mm_st_reader *r = NULL;
        mm_error err_store, *err = &err_store;
        mm_error_clear(err);
        mm_status st = open_image(&im, &r, err);
        if (st == MM_OK) {
            opened++;
            check_consistent(r, im.size);
        } else if (st == MM_ERR_INVALID_FILE && r == NULL && err->message[0]) {
            rejected++;
        } else {
            mm_test_report_fail(__FILE__, __LINE__, "edit %d: status %s (%s)", iter, mm_status_name(st),
                                err->message);
        }
        mm_st_close(r);
        free(im.bytes);
    }
    CHECK(rejected > 2000);
    CHECK(opened > 0); /* e.g. edits inside the padding or a metadata value */
    printf("structural corruption: %d opened, %d rejected\n", opened, rejected);
    free(text);
}

/* A checkpoint may hold a U32/U16/C64 tensor megamoe never asks for: the file opens, the tensor is
 * listed (dtype MM_DTYPE_INVALID, its string kept) and reading it as a tensor is refused; its byte span
 * is still checked with the dtype's width, and lower-case or unknown strings stay rejected. */
static void test_foreign_dtypes(void) {
    mm_error err_store, *err = &err_store;
    mm_st_reader *r = expect_accept("{\"idx\":{\"dtype\":\"U32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                    "\"w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
                                    "\"h\":{\"dtype\":\"U16\",\"shape\":[1,2],\"data_offsets\":[12,16]},"
                                    "\"c\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[16,24]}}",
                                    24);
    if (r) {
        const mm_st_tensor_info *idx = mm_st_find(r, "idx");
        CHECK(idx && idx->dtype == MM_DTYPE_INVALID && strcmp(idx->dtype_string, "U32") == 0);
        CHECK(idx && idx->nbytes == 8);
        const mm_st_tensor_info *w = mm_st_find(r, "w");
        CHECK(w && w->dtype == MM_DTYPE_BF16 && strcmp(w->dtype_string, "BF16") == 0);
        mm_tensor t;
        CHECK_OK(mm_st_read_tensor(r, "w", &t, err), err);
        CHECK(t.data && ((unsigned char *)t.data)[0] == 8); /* data bytes are 0, 1, 2, ... */
        mm_tensor_free_data(&t);
        CHECK_STATUS(mm_st_read_tensor(r, "idx", &t, err), MM_ERR_INVALID_FILE, err);
        CHECK_STR_CONTAINS(err->message, "tensor \"idx\": dtype U32 is not one megamoe computes with");
        unsigned char raw[8];
        CHECK_OK(mm_st_read(r, idx, raw, err), err);
        CHECK(raw[7] == 7);
        mm_st_close(r);
    }
    expect_reject("{\"idx\":{\"dtype\":\"U32\",\"shape\":[2],\"data_offsets\":[0,6]}}", 6,
                  "data_offsets [0, 6] span 6 bytes but shape [2] of U32 needs 8");
    expect_reject("{\"idx\":{\"dtype\":\"u32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                  "unknown dtype \"u32\"");
    expect_reject("{\"idx\":{\"dtype\":\"U24\",\"shape\":[2],\"data_offsets\":[0,6]}}", 6,
                  "unknown dtype \"U24\"");
}

int main(void) {
    test_foreign_dtypes();
    test_container_rules();
    test_metadata_rules();
    test_entry_rules();
    test_tiling_rules();
    test_logical_dtype_rules();
    test_truncation();
    test_random_corruption();
    test_structural_corruption();
    return mm_test_finish("test_safetensors_reject");
}
