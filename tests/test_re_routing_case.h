/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_re_routing_case.h: shared fixtures of the MoeReRouting tests: a call's tensors with owned
 * buffers (inputs random, outputs filled with a sentinel), and the naive reference built directly from
 * the spec's SrcOffset/DstOffset formulas, written apart from the library's block plan. */
#ifndef MEGAMOE_TEST_RE_ROUTING_CASE_H
#define MEGAMOE_TEST_RE_ROUTING_CASE_H

#include <stdlib.h>
#include <string.h>

#include "megamoe/re_routing.h"
#include "testlib.h"

enum { SENTINEL = 0xA5 };

/* One call's tensors, owning their buffers. Inputs are filled with random bytes, outputs with SENTINEL. */
typedef struct rr_case {
    mm_tensor tokens, counts, scales;
    int has_scales;
    mm_tensor out_tokens, out_scales, out_idx, out_num;
    mm_tensor spare; /* a descriptor the validation tests may point an output at */
    mm_re_routing_inputs in;
    mm_re_routing_outputs out;
    void *out_data[4];    /* the output buffers as allocated, and their sizes, for the sentinel check */
    int64_t out_bytes[4]; /* (tests may change the descriptors) */
} rr_case;

static inline void *alloc_filled(const mm_tensor *t, int byte, uint64_t *rng) {
    int64_t n = mm_tensor_nbytes(t);
    if (n <= 0) return NULL;
    uint8_t *p = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) p[i] = rng ? (uint8_t)mm_test_rand_u64(rng) : (uint8_t)byte;
    return p;
}

static inline void write_count_at(mm_tensor *t, int64_t i, int64_t v) {
    if (t->dtype == MM_DTYPE_I32)
        ((int32_t *)t->data)[i] = (int32_t)v;
    else
        ((int64_t *)t->data)[i] = v;
}

static inline int64_t read_count_at(const mm_tensor *t, int64_t i) {
    return t->dtype == MM_DTYPE_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* scale_ndim 0 means no per_token_scales; 1 gives (A), 2 gives (A, scale_cols). */
static inline void case_init(rr_case *c, mm_dtype dtype, int64_t a, int64_t h, mm_dtype count_dtype,
                             int64_t n, int64_t e, const int64_t *counts, mm_dtype scale_dtype,
                             int scale_ndim, int64_t scale_cols, uint64_t *rng) {
    memset(c, 0, sizeof *c);
    int64_t tshape[2] = {a, h}, cshape[2] = {n, e}, sshape[2] = {a, scale_cols}, idx_shape[1] = {a},
            num_shape[1] = {e};
    c->tokens = mm_tensor_make(dtype, 2, tshape, NULL);
    c->tokens.data = alloc_filled(&c->tokens, 0, rng);
    c->counts = mm_tensor_make(count_dtype, 2, cshape, NULL);
    c->counts.data = alloc_filled(&c->counts, 0, NULL);
    for (int64_t i = 0; i < n * e; i++) write_count_at(&c->counts, i, counts[i]);
    c->has_scales = scale_ndim > 0;
    if (c->has_scales) {
        c->scales = mm_tensor_make(scale_dtype, scale_ndim, sshape, NULL);
        c->scales.data = alloc_filled(&c->scales, 0, rng);
        c->out_scales = mm_tensor_make(scale_dtype, scale_ndim, sshape, NULL);
        c->out_scales.data = alloc_filled(&c->out_scales, SENTINEL, NULL);
    }
    c->out_tokens = mm_tensor_make(dtype, 2, tshape, NULL);
    c->out_tokens.data = alloc_filled(&c->out_tokens, SENTINEL, NULL);
    c->out_idx = mm_tensor_make(MM_DTYPE_I32, 1, idx_shape, NULL);
    c->out_idx.data = alloc_filled(&c->out_idx, SENTINEL, NULL);
    c->out_num = mm_tensor_make(count_dtype, 1, num_shape, NULL);
    c->out_num.data = alloc_filled(&c->out_num, SENTINEL, NULL);
    const mm_tensor *outs[4] = {&c->out_tokens, &c->out_scales, &c->out_idx, &c->out_num};
    for (int i = 0; i < 4; i++) {
        c->out_data[i] = outs[i]->data;
        c->out_bytes[i] = outs[i]->data ? mm_tensor_nbytes(outs[i]) : 0;
    }
    c->in = (mm_re_routing_inputs){&c->tokens, &c->counts, c->has_scales ? &c->scales : NULL};
    c->out = (mm_re_routing_outputs){&c->out_tokens, c->has_scales ? &c->out_scales : NULL, &c->out_idx,
                                     &c->out_num};
}

static inline void case_free(rr_case *c) {
    free(c->tokens.data);
    free(c->counts.data);
    free(c->scales.data);
    for (int i = 0; i < 4; i++) free(c->out_data[i]);
}

static inline int all_bytes_are(const void *data, int64_t n, int byte) {
    const uint8_t *p = data;
    for (int64_t i = 0; i < n; i++)
        if (p[i] != byte) return 0;
    return 1;
}

static inline int outputs_untouched(const rr_case *c) {
    for (int i = 0; i < 4; i++)
        if (!all_bytes_are(c->out_data[i], c->out_bytes[i], SENTINEL)) return 0;
    return 1;
}

/* The reference: for every source row, its (rank, expert, position) by walking the blocks rank-major,
 * then its destination from the spec's DstOffset formula. Returns src_of_dst (caller frees). */
static inline int64_t *reference_sources(const rr_case *c) {
    int64_t n = c->counts.shape[0], e = c->counts.shape[1], a = c->tokens.shape[0];
    int64_t *src_of_dst = malloc((size_t)(a > 0 ? a : 1) * sizeof *src_of_dst);
    int64_t src = 0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t x = 0; x < e; x++)
            for (int64_t pos = 0; pos < read_count_at(&c->counts, r * e + x); pos++, src++) {
                int64_t dst = pos;
                for (int64_t x2 = 0; x2 < e; x2++)
                    for (int64_t r2 = 0; r2 < n; r2++)
                        if (x2 < x || (x2 == x && r2 < r)) dst += read_count_at(&c->counts, r2 * e + x2);
                src_of_dst[dst] = src;
            }
    return src_of_dst;
}

/* Checks every output of a successful call against the reference; returns the number of mismatches. */
static inline int64_t check_against_reference(const rr_case *c, const mm_re_routing_attrs *attrs) {
    int64_t n = c->counts.shape[0], e = c->counts.shape[1], a = c->tokens.shape[0];
    int64_t *src_of_dst = reference_sources(c);
    int64_t bad = 0;
    int64_t trow = mm_dtype_row_bytes(c->tokens.dtype, c->tokens.shape[1]);
    int64_t srow = c->has_scales && a > 0 ? mm_tensor_nbytes(&c->scales) / a : 0;
    const int32_t *idx = c->out_idx.data;
    for (int64_t d = 0; d < a; d++) {
        int64_t s = src_of_dst[d];
        bad += memcmp((const uint8_t *)c->out_tokens.data + d * trow,
                      (const uint8_t *)c->tokens.data + s * trow, (size_t)trow) != 0;
        if (srow)
            bad += memcmp((const uint8_t *)c->out_scales.data + d * srow,
                          (const uint8_t *)c->scales.data + s * srow, (size_t)srow) != 0;
        if (attrs->idx_type == 0)
            bad += idx[d] != s;
        else
            bad += idx[s] != d;
    }
    int64_t running = 0;
    for (int64_t x = 0; x < e; x++) {
        int64_t total = 0;
        for (int64_t r = 0; r < n; r++) total += read_count_at(&c->counts, r * e + x);
        running += total;
        bad += read_count_at(&c->out_num, x) != (attrs->expert_token_num_type == 1 ? total : running);
    }
    free(src_of_dst);
    return bad;
}

#endif
