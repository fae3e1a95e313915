/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_case_re_routing.c: mm_case_run on moe_re_routing case files written with the writer API.
 *
 * Pins the spec's worked example (counts [[1,2],[3,1]]: gather [0,3,4,5,1,2,6], scatter
 * [0,4,5,1,2,3,6], expert_token_num [4,3] or [4,7]), random cases against a naive reference built from
 * the SrcOffset/DstOffset definitions, the output file's metadata and tensor list, and the strictness
 * contract: every broken file is an input error whose one-line message names the tensor or attribute,
 * and the output file is never created or touched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "megamoe/case.h"
#include "megamoe/safetensors.h"
#include "testlib.h"

static char tmp_dir[64];
static char in_path[128], out_path[128];

/* ---- building and reading files ---------------------------------------------------------------- */

static mm_st_writer *new_case(const char *op) {
    mm_st_writer *w = NULL;
    mm_error err_record, *err = &err_record;
    CHECK_OK(mm_st_writer_create(&w, err), err);
    if (op) CHECK_OK(mm_st_writer_set_metadata(w, "op", op, err), err);
    return w;
}

static void add(mm_st_writer *w, const char *name, mm_dtype dtype, int ndim, const int64_t *shape,
                const void *data) {
    mm_error err_record, *err = &err_record;
    mm_tensor t = mm_tensor_make(dtype, ndim, shape, (void *)data);
    CHECK_OK(mm_st_writer_add(w, name, &t, err), err);
}

static void meta(mm_st_writer *w, const char *key, const char *value) {
    mm_error err_record, *err = &err_record;
    CHECK_OK(mm_st_writer_set_metadata(w, key, value, err), err);
}

static void write_case(mm_st_writer *w, const char *path) {
    mm_error err_record, *err = &err_record;
    CHECK_OK(mm_st_writer_write(w, path, err), err);
    mm_st_writer_destroy(w);
}

static void write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK_EQ_INT(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static mm_status run_case(mm_error *err) {
    mm_case_options options = {MM_CASE_BACKEND_THREADS, 0.0, 0};
    mm_error_clear(err);
    return mm_case_run(in_path, out_path, &options, err);
}

/* ---- the worked example -------------------------------------------------------------------------- */

enum { EX_A = 7, EX_H = 3 };

static uint16_t example_token(int row, int col) {
    return (uint16_t)(0x3f80 + row * 8 + col);
}

static void write_example(mm_dtype count_dtype, const char *num_type, const char *idx_type, int with_scales) {
    uint16_t tokens[EX_A * EX_H];
    for (int r = 0; r < EX_A; r++)
        for (int c = 0; c < EX_H; c++) tokens[r * EX_H + c] = example_token(r, c);
    int32_t counts32[4] = {1, 2, 3, 1};
    int64_t counts64[4] = {1, 2, 3, 1};
    float scales[EX_A] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f};
    int64_t tshape[2] = {EX_A, EX_H}, cshape[2] = {2, 2}, sshape[1] = {EX_A};
    mm_st_writer *w = new_case("moe_re_routing");
    add(w, "tokens", MM_DTYPE_BF16, 2, tshape, tokens);
    add(w, "expert_token_num_per_rank", count_dtype, 2, cshape,
        count_dtype == MM_DTYPE_I32 ? (const void *)counts32 : (const void *)counts64);
    if (with_scales) add(w, "per_token_scales", MM_DTYPE_F32, 1, sshape, scales);
    if (num_type) meta(w, "expert_token_num_type", num_type);
    if (idx_type) meta(w, "idx_type", idx_type);
    write_case(w, in_path);
}

static void check_example(mm_dtype count_dtype, const char *num_type, const char *idx_type, int with_scales,
                          const int32_t *expected_idx, const int64_t *expected_num) {
    static const int gather[EX_A] = {0, 3, 4, 5, 1, 2, 6};
    mm_error err_record, *err = &err_record;
    unlink(out_path);
    write_example(count_dtype, num_type, idx_type, with_scales);
    CHECK_OK(run_case(err), err);
    mm_st_reader *r = NULL;
    CHECK_OK(mm_st_open(out_path, &r, err), err);
    if (!r) return;
    CHECK_EQ_INT(mm_st_tensor_count(r), with_scales ? 4 : 3);
    const char *op = mm_st_metadata(r, "op"), *version = mm_st_metadata(r, "megamoe_version");
    CHECK(op && strcmp(op, "moe_re_routing") == 0);
    CHECK(version && strcmp(version, "0.1.0") == 0);
    CHECK_EQ_INT(mm_st_metadata_count(r), 2);

    mm_tensor t;
    CHECK_OK(mm_st_read_tensor(r, "permute_tokens", &t, err), err);
    CHECK_EQ_INT(t.dtype, MM_DTYPE_BF16);
    CHECK_EQ_INT(t.ndim, 2);
    CHECK_EQ_INT(t.shape[0], EX_A);
    CHECK_EQ_INT(t.shape[1], EX_H);
    for (int i = 0; t.data && i < EX_A; i++)
        for (int c = 0; c < EX_H; c++)
            CHECK_EQ_HEX(((const uint16_t *)t.data)[i * EX_H + c], example_token(gather[i], c));
    mm_tensor_free_data(&t);

    CHECK_OK(mm_st_read_tensor(r, "permute_token_idx", &t, err), err);
    CHECK_EQ_INT(t.dtype, MM_DTYPE_I32);
    CHECK_EQ_INT(t.ndim, 1);
    CHECK_EQ_INT(t.shape[0], EX_A);
    for (int i = 0; t.data && i < EX_A; i++) CHECK_EQ_INT(((const int32_t *)t.data)[i], expected_idx[i]);
    mm_tensor_free_data(&t);

    CHECK_OK(mm_st_read_tensor(r, "expert_token_num", &t, err), err);
    CHECK_EQ_INT(t.dtype, count_dtype);
    CHECK_EQ_INT(t.ndim, 1);
    CHECK_EQ_INT(t.shape[0], 2);
    for (int e = 0; t.data && e < 2; e++) {
        int64_t v = count_dtype == MM_DTYPE_I32 ? ((const int32_t *)t.data)[e] : ((const int64_t *)t.data)[e];
        CHECK_EQ_INT(v, expected_num[e]);
    }
    mm_tensor_free_data(&t);

    if (with_scales) {
        /* Scales move with their token: 0.5 + token index. */
        CHECK_OK(mm_st_read_tensor(r, "permute_per_token_scales", &t, err), err);
        CHECK_EQ_INT(t.dtype, MM_DTYPE_F32);
        CHECK_EQ_INT(t.shape[0], EX_A);
        for (int i = 0; t.data && i < EX_A; i++) CHECK_NEAR(((const float *)t.data)[i], 0.5 + gather[i], 0);
        mm_tensor_free_data(&t);
    } else {
        CHECK(mm_st_find(r, "permute_per_token_scales") == NULL);
    }
    mm_st_close(r);
}

static void test_worked_example(void) {
    static const int32_t gather[EX_A] = {0, 3, 4, 5, 1, 2, 6}, scatter[EX_A] = {0, 4, 5, 1, 2, 3, 6};
    static const int64_t counts[2] = {4, 3}, cumsum[2] = {4, 7};
    /* Absent attributes take the defaults: counts and gather index. */
    check_example(MM_DTYPE_I32, NULL, NULL, 0, gather, counts);
    check_example(MM_DTYPE_I32, "1", "0", 1, gather, counts);
    check_example(MM_DTYPE_I32, "1", "1", 0, scatter, counts);
    check_example(MM_DTYPE_I64, "0", "0", 1, gather, cumsum);
    check_example(MM_DTYPE_I64, " 0 ", "1", 0, scatter, cumsum); /* JSON allows surrounding whitespace */
}

/* ---- random cases against a naive reference ------------------------------------------------------ */

static const mm_dtype token_dtypes[] = {MM_DTYPE_F16,      MM_DTYPE_BF16,       MM_DTYPE_I8,
                                        MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_HIFLOAT8,
                                        MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E1M2};

static void test_random_case(uint64_t *rng, int iteration) {
    int64_t n = 1 + (int64_t)(mm_test_rand_u64(rng) % 5), e = 1 + (int64_t)(mm_test_rand_u64(rng) % 6);
    int64_t h = 1 + (int64_t)(mm_test_rand_u64(rng) % 40);
    mm_dtype dtype = token_dtypes[mm_test_rand_u64(rng) % (sizeof token_dtypes / sizeof token_dtypes[0])];
    mm_dtype count_dtype = mm_test_rand_u64(rng) % 2 ? MM_DTYPE_I32 : MM_DTYPE_I64;
    int scale_kind = (int)(mm_test_rand_u64(rng) % 4); /* 0 none, 1 f32 (A), 2 f32 (A, 3), 3 e8m0 (A, 2) */
    int64_t num_type = (int64_t)(mm_test_rand_u64(rng) % 2), idx_type = (int64_t)(mm_test_rand_u64(rng) % 2);
    int64_t counts[30], a = 0;
    for (int64_t i = 0; i < n * e; i++) {
        counts[i] = (int64_t)(mm_test_rand_u64(rng) % 7);
        a += counts[i];
    }
    int64_t row_bytes = mm_dtype_bits(dtype) == 4 ? (h + 1) / 2 : h * mm_dtype_bits(dtype) / 8;
    int64_t scale_cols = scale_kind == 2 ? 3 : (scale_kind == 3 ? 2 : 1);
    int64_t scale_row_bytes = scale_kind == 3 ? scale_cols : 4 * scale_cols;
    unsigned char *tokens = malloc((size_t)(a * row_bytes + 1)),
                  *scales = malloc((size_t)(a * scale_row_bytes + 1));
    int32_t counts32[30];
    for (int64_t i = 0; i < a * row_bytes; i++) tokens[i] = (unsigned char)mm_test_rand_u64(rng);
    if (mm_dtype_bits(dtype) == 4 && h % 2)
        for (int64_t r = 0; r < a; r++) tokens[r * row_bytes + row_bytes - 1] &= 0x0f;
    for (int64_t i = 0; i < a * scale_row_bytes; i++)
        scales[i] = (unsigned char)(mm_test_rand_u64(rng) % 200);
    for (int64_t i = 0; i < n * e; i++) counts32[i] = (int32_t)counts[i];

    int64_t tshape[2] = {a, h}, cshape[2] = {n, e}, sshape[2] = {a, scale_cols};
    char num_text[8], idx_text[8];
    snprintf(num_text, sizeof num_text, "%d", (int)num_type);
    snprintf(idx_text, sizeof idx_text, "%d", (int)idx_type);
    mm_st_writer *w = new_case("moe_re_routing");
    add(w, "tokens", dtype, 2, tshape, tokens);
    add(w, "expert_token_num_per_rank", count_dtype, 2, cshape,
        count_dtype == MM_DTYPE_I32 ? (const void *)counts32 : (const void *)counts);
    if (scale_kind)
        add(w, "per_token_scales", scale_kind == 3 ? MM_DTYPE_E8M0 : MM_DTYPE_F32, scale_kind == 1 ? 1 : 2,
            sshape, scales);
    meta(w, "expert_token_num_type", num_text);
    meta(w, "idx_type", idx_text);
    meta(w, "x-note", "users' notes are allowed under x- keys");
    write_case(w, in_path);

    /* Reference straight from the definitions: block (r, e) starts at SrcOffset(r, e) in the input and at
     * DstOffset(r, e) in the output. */
    int32_t gather[256], idx_expected[256];
    int64_t expert_num[8];
    for (int64_t r = 0; r < n; r++)
        for (int64_t x = 0; x < e; x++) {
            int64_t src = 0, dst = 0;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < e; j++) {
                    if (i < r || (i == r && j < x)) src += counts[i * e + j];
                    if (j < x || (j == x && i < r)) dst += counts[i * e + j];
                }
            for (int64_t k = 0; k < counts[r * e + x]; k++) gather[dst + k] = (int32_t)(src + k);
        }
    for (int64_t d = 0; d < a; d++) {
        if (idx_type == 0)
            idx_expected[d] = gather[d];
        else
            idx_expected[gather[d]] = (int32_t)d;
    }
    int64_t running = 0;
    for (int64_t x = 0; x < e; x++) {
        int64_t sum = 0;
        for (int64_t r = 0; r < n; r++) sum += counts[r * e + x];
        running += sum;
        expert_num[x] = num_type == 0 ? running : sum;
    }

    mm_error err_record, *err = &err_record;
    unlink(out_path);
    mm_status st = run_case(err);
    CHECK_OK(st, err);
    mm_st_reader *rd = NULL;
    if (st == MM_OK) CHECK_OK(mm_st_open(out_path, &rd, err), err);
    if (!rd) {
        fprintf(stderr, "random case %d failed\n", iteration);
        goto done;
    }
    mm_tensor t;
    int mismatches = 0;
    CHECK_OK(mm_st_read_tensor(rd, "permute_tokens", &t, err), err);
    CHECK_EQ_INT(t.dtype, dtype);
    CHECK_EQ_INT(t.shape[0], a);
    CHECK_EQ_INT(t.shape[1], h);
    for (int64_t d = 0; t.data && d < a; d++)
        mismatches += memcmp((unsigned char *)t.data + d * row_bytes, tokens + gather[d] * row_bytes,
                             (size_t)row_bytes) != 0;
    mm_tensor_free_data(&t);
    CHECK_OK(mm_st_read_tensor(rd, "permute_token_idx", &t, err), err);
    for (int64_t d = 0; t.data && d < a; d++) mismatches += ((const int32_t *)t.data)[d] != idx_expected[d];
    mm_tensor_free_data(&t);
    CHECK_OK(mm_st_read_tensor(rd, "expert_token_num", &t, err), err);
    CHECK_EQ_INT(t.dtype, count_dtype);
    for (int64_t x = 0; t.data && x < e; x++) {
        int64_t v = count_dtype == MM_DTYPE_I32 ? ((const int32_t *)t.data)[x] : ((const int64_t *)t.data)[x];
        mismatches += v != expert_num[x];
    }
    mm_tensor_free_data(&t);
    if (scale_kind) {
        CHECK_OK(mm_st_read_tensor(rd, "permute_per_token_scales", &t, err), err);
        CHECK_EQ_INT(t.ndim, scale_kind == 1 ? 1 : 2);
        for (int64_t d = 0; t.data && d < a; d++)
            mismatches += memcmp((unsigned char *)t.data + d * scale_row_bytes,
                                 scales + gather[d] * scale_row_bytes, (size_t)scale_row_bytes) != 0;
        mm_tensor_free_data(&t);
    } else {
        CHECK(mm_st_find(rd, "permute_per_token_scales") == NULL);
    }
    CHECK_EQ_INT(mismatches, 0);
    if (mismatches)
        fprintf(stderr, "random case %d: N=%lld E=%lld A=%lld H=%lld %s\n", iteration, (long long)n,
                (long long)e, (long long)a, (long long)h, mm_dtype_name(dtype));
    mm_st_close(rd);
done:
    free(tokens);
    free(scales);
}

/* ---- broken files -------------------------------------------------------------------------------- */

typedef struct broken_case {
    const char *label;
    const char *needle; /* the message must name this */
    const char *op;     /* NULL: omit "op" */
    int omit_tokens, omit_counts;
    mm_dtype tokens_dtype;    /* 0: bf16 */
    int tokens_ndim;          /* 0: 2 */
    mm_dtype counts_dtype;    /* 0: i32 */
    int counts_1d;            /* counts given as (4,) instead of (2, 2) */
    int32_t counts[4];        /* all zero: {1, 2, 3, 1} (A = 7) */
    const char *key, *value;  /* one more metadata entry */
    const char *extra_tensor; /* one more tensor */
    mm_dtype scales_dtype;    /* 0: no scales */
} broken_case;

static void write_broken(const broken_case *b) {
    uint64_t tokens[7 * 4] = {0}; /* room for every dtype the cases try */
    int32_t counts[4] = {1, 2, 3, 1};
    if (b->counts[0] || b->counts[1] || b->counts[2] || b->counts[3])
        memcpy(counts, b->counts, sizeof counts);
    int64_t counts64[4] = {counts[0], counts[1], counts[2], counts[3]};
    int64_t t2[2] = {7, 4}, t1[1] = {7 * 4}, t3[3] = {7, 2, 2}, c2[2] = {2, 2}, c1[1] = {4}, s1[1] = {7};
    int ndim = b->tokens_ndim ? b->tokens_ndim : 2;
    mm_dtype cd = b->counts_dtype ? b->counts_dtype : MM_DTYPE_I32;
    mm_st_writer *w = new_case(b->op);
    if (!b->omit_tokens)
        add(w, "tokens", b->tokens_dtype ? b->tokens_dtype : MM_DTYPE_BF16, ndim,
            ndim == 1 ? t1 : (ndim == 3 ? t3 : t2), tokens);
    if (!b->omit_counts)
        add(w, "expert_token_num_per_rank", cd, b->counts_1d ? 1 : 2, b->counts_1d ? c1 : c2,
            cd == MM_DTYPE_I64 ? (const void *)counts64 : (const void *)counts);
    if (b->scales_dtype) add(w, "per_token_scales", b->scales_dtype, 1, s1, tokens);
    if (b->extra_tensor) add(w, b->extra_tensor, MM_DTYPE_I32, 1, c1, counts);
    if (b->key) meta(w, b->key, b->value);
    write_case(w, in_path);
}

static const char sentinel[] = "an existing output file that a failed case must leave alone\n";

/* Runs the (already written) broken input twice: without an output file (none may appear) and with
 * one (it must stay byte-identical). */
static void expect_rejected(const char *label, const char *needle, mm_status expected) {
    mm_error err_record, *err = &err_record;
    unlink(out_path);
    mm_status st = run_case(err);
    if (expected != MM_OK)
        CHECK_STATUS(st, expected, err);
    else
        CHECK(mm_status_is_input_error(st));
    if (!mm_status_is_input_error(st) && expected == MM_OK)
        fprintf(stderr, "case %s: status %s: %s\n", label, mm_status_name(st), err->message);
    if (needle) CHECK_STR_CONTAINS(err->message, needle);
    CHECK(strchr(err->message, '\n') == NULL);
    CHECK(err->message[0] != '\0');
    CHECK(!file_exists(out_path));

    write_bytes(out_path, sentinel, sizeof sentinel - 1);
    CHECK(run_case(err) == st);
    size_t size = 0;
    unsigned char *after = mm_test_read_file(out_path, &size);
    CHECK(after && size == sizeof sentinel - 1 && memcmp(after, sentinel, size) == 0);
    free(after);
    unlink(out_path);
}

static void test_broken_cases(void) {
    static const broken_case cases[] = {
        {.label = "missing op", .needle = "\"op\" is missing", .op = NULL},
        {.label = "unknown op", .needle = "moe_rerouting", .op = "moe_rerouting"},
        {.label = "missing tokens",
         .needle = "\"tokens\" is missing",
         .op = "moe_re_routing",
         .omit_tokens = 1},
        {.label = "missing counts",
         .needle = "\"expert_token_num_per_rank\" is missing",
         .op = "moe_re_routing",
         .omit_counts = 1},
        {.label = "tokens f32",
         .needle = "\"tokens\" has dtype f32",
         .op = "moe_re_routing",
         .tokens_dtype = MM_DTYPE_F32},
        {.label = "counts i16",
         .needle = "\"expert_token_num_per_rank\" has dtype int16",
         .op = "moe_re_routing",
         .counts_dtype = MM_DTYPE_I16},
        {.label = "scales bf16",
         .needle = "\"per_token_scales\" has dtype bf16",
         .op = "moe_re_routing",
         .scales_dtype = MM_DTYPE_BF16},
        {.label = "tokens 1-d",
         .needle = "\"tokens\" has 1 dimension (",
         .op = "moe_re_routing",
         .tokens_ndim = 1},
        {.label = "tokens 3-d",
         .needle = "\"tokens\" has 3 dimensions",
         .op = "moe_re_routing",
         .tokens_ndim = 3},
        {.label = "counts 1-d",
         .needle = "\"expert_token_num_per_rank\" has 1 dimension (",
         .op = "moe_re_routing",
         .counts_1d = 1},
        {.label = "attribute fraction",
         .needle = "idx_type",
         .op = "moe_re_routing",
         .key = "idx_type",
         .value = "0.5"},
        {.label = "attribute word",
         .needle = "idx_type",
         .op = "moe_re_routing",
         .key = "idx_type",
         .value = "zero"},
        {.label = "attribute bool",
         .needle = "expert_token_num_type",
         .op = "moe_re_routing",
         .key = "expert_token_num_type",
         .value = "true"},
        {.label = "attribute empty",
         .needle = "idx_type",
         .op = "moe_re_routing",
         .key = "idx_type",
         .value = ""},
        {.label = "attribute out of range",
         .needle = "attribute \"idx_type\" = 2 is outside [0, 1]",
         .op = "moe_re_routing",
         .key = "idx_type",
         .value = "2"},
        {.label = "attribute negative",
         .needle = "attribute \"expert_token_num_type\" = -1 is outside [0, 1]",
         .op = "moe_re_routing",
         .key = "expert_token_num_type",
         .value = "-1"},
        {.label = "counts sum",
         .needle = "expert_token_num_per_rank",
         .op = "moe_re_routing",
         .counts = {1, 2, 3, 2}},
        {.label = "negative count",
         .needle = "expert_token_num_per_rank[1][0] = -3",
         .op = "moe_re_routing",
         .counts = {1, 2, -3, 7}},
        {.label = "unknown key",
         .needle = "metadata key \"idx-type\"",
         .op = "moe_re_routing",
         .key = "idx-type",
         .value = "0"},
        {.label = "ranks on re-routing",
         .needle = "\"ranks\" does not apply",
         .op = "moe_re_routing",
         .key = "ranks",
         .value = "2"},
        {.label = "unknown tensor",
         .needle = "tensor \"scales\" is not an input",
         .op = "moe_re_routing",
         .extra_tensor = "scales"},
        {.label = "rank-prefixed tensor",
         .needle = "tensor \"rank0.tokens\" is not an input",
         .op = "moe_re_routing",
         .extra_tensor = "rank0.tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_broken(&cases[i]);
        expect_rejected(cases[i].label, cases[i].needle, MM_OK);
    }

    /* Raw bytes: a valid file cut short, a header that is not JSON, an empty file, a length past the end. */
    broken_case valid = {.label = "valid", .op = "moe_re_routing"};
    write_broken(&valid);
    size_t size = 0;
    unsigned char *bytes = mm_test_read_file(in_path, &size);
    CHECK(bytes != NULL && size > 64);
    if (bytes) {
        write_bytes(in_path, bytes, size - 5);
        expect_rejected("truncated", NULL, MM_OK);
        write_bytes(in_path, bytes, 20);
        expect_rejected("truncated header", NULL, MM_OK);
        free(bytes);
    }
    unsigned char garbage[8 + 12] = {12,  0,   0,   0,   0,   0,   0,   0,   'n', 'o',
                                     't', ' ', 'j', 's', 'o', 'n', '!', '!', '!', '!'};
    write_bytes(in_path, garbage, sizeof garbage);
    expect_rejected("garbage header", NULL, MM_OK);
    write_bytes(in_path, "", 0);
    expect_rejected("empty file", NULL, MM_OK);
    unsigned char huge[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    write_bytes(in_path, huge, sizeof huge);
    expect_rejected("header length past the end", NULL, MM_OK);
}

static void test_other_failures(void) {
    mm_error err_record, *err = &err_record;
    mm_case_options options = {MM_CASE_BACKEND_THREADS, 0.0, 0};
    /* A missing input file is an I/O error (exit 1), not an input error. */
    CHECK_STATUS(mm_case_run("/nonexistent/megamoe/case.safetensors", out_path, &options, err), MM_ERR_IO,
                 err);
    CHECK_STATUS(mm_case_run(NULL, out_path, &options, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STATUS(mm_case_run(in_path, NULL, &options, err), MM_ERR_INVALID_ARGUMENT, err);
    options.timeout_seconds = -1;
    CHECK_STATUS(mm_case_run(in_path, out_path, &options, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "timeout_seconds");
    /* A collective operator's case missing a required attribute is a broken file naming it (mega_moe has
     * its adapter now; it used to be the example of an unsupported contract operator). */
    mm_st_writer *w = new_case("mega_moe");
    meta(w, "ranks", "2");
    write_case(w, in_path);
    CHECK_STATUS(mm_case_run(in_path, out_path, NULL, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "moe_expert_num");
    CHECK(!file_exists(out_path));
}

int main(void) {
    if (!mm_test_make_temp_dir(tmp_dir, sizeof tmp_dir, "megamoe_test_case")) return 1;
    snprintf(in_path, sizeof in_path, "%s/in.safetensors", tmp_dir);
    snprintf(out_path, sizeof out_path, "%s/out.safetensors", tmp_dir);

    test_worked_example();
    uint64_t rng = 0x5eed;
    for (int i = 0; i < 60; i++) test_random_case(&rng, i);
    test_broken_cases();
    test_other_failures();

    unlink(in_path);
    unlink(out_path);
    rmdir(tmp_dir);
    /* rmdir fails if a temporary file was left beside the output. */
    CHECK(!file_exists(tmp_dir));
    return mm_test_finish("test_case_re_routing");
}
