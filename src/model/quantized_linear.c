/* SPDX-License-Identifier: Apache-2.0 */
/* model/quantized_linear.c: the 4-bit linears of AWQ and GPTQ checkpoints: unpacking qweight / qzeros /
 * scales (/ g_idx) into MegaMoE's UINT4 form (codes 0..15 two per byte along the input dimension, F32
 * group scales exact from F16, U8 zero points; one scale per output row and group of `group_size`
 * inputs), and the experts of a layer loaded from them, either in that form (scenario A16W4-INT) or
 * dequantized to BF16 by the contract's rule w' = BF16(F32(q - z) * s) (option dequantize_to_bf16), which
 * the GEMM then uses exactly as the native path does. The packings, with their sources, are in
 * docs/models.md ("AWQ and GPTQ"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/free_all.h"
#include "megamoe/formats.h"
#include "megamoe/mega_moe.h"
#include "model/model_internal.h"

/* AutoAWQ packs output channels 8j + c of a 32-bit word in nibble AWQ_REVERSE_ORDER[c] (its pack order
 * is [0, 2, 4, 6, 1, 3, 5, 7]); GPTQ packs element i of a word in nibble i. */
static const int awq_nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

int64_t mm_model_quant_group(const mm_model_quant *q, int64_t k) {
    return q->group_size > 0 ? q->group_size : k;
}

static unsigned nibble(uint32_t word, int i) {
    return (word >> (4 * i)) & 0xFu;
}

/* prefix.suffix as an I32 / F16 tensor of (rows, cols), dims naming the keys of that shape. */
static mm_status part(mm_model_files *files, const char *prefix, const char *suffix, mm_dtype dtype,
                      int64_t rows, int64_t cols, const char *dims, mm_tensor *out, mm_error *err) {
    char name[200];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    const mm_dtype allowed[2] = {dtype, MM_DTYPE_INVALID};
    return mm_model_files_tensor_of(files, name, allowed, rows, cols, dims, out, err);
}

mm_status mm_model_qlinear_read(mm_model_files *files, const char *prefix, int64_t n, int64_t k,
                                const char *n_key, const char *k_key, uint8_t *codes, float *scales,
                                uint8_t *zeros, mm_error *err) {
    const mm_model_quant *q = &files->model->quant;
    int awq = q->method == MM_MODEL_QUANT_AWQ;
    int64_t g = mm_model_quant_group(q, k), groups = k / g;
    if (k % g != 0)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "%s: quantization_config group_size = %lld does not divide the %lld inputs (%s)",
                       prefix, (long long)g, (long long)k, k_key);
    if (n % 8 != 0 || (!awq && k % 8 != 0))
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "%s: %s = %lld%s must be a multiple of 8 (eight 4-bit codes per I32 word)", prefix,
                       n % 8 != 0 ? n_key : k_key, (long long)(n % 8 != 0 ? n : k),
                       n % 8 != 0 ? "" : " (GPTQ packs along the inputs)");
    char wdims[160], zdims[160], sdims[160];
    snprintf(wdims, sizeof wdims, awq ? "(%s, %s / 8)" : "(%s / 8, %s)", k_key, n_key);
    snprintf(zdims, sizeof zdims, "(%s / group_size, %s / 8)", k_key, n_key);
    snprintf(sdims, sizeof sdims, "(%s / group_size, %s)", k_key, n_key);
    mm_tensor tw, tz, ts;
    mm_status st;
    if ((st = part(files, prefix, "qweight", MM_DTYPE_I32, awq ? k : k / 8, awq ? n / 8 : n, wdims, &tw,
                   err)) ||
        (st = part(files, prefix, "qzeros", MM_DTYPE_I32, groups, n / 8, zdims, &tz, err)) ||
        (st = part(files, prefix, "scales", MM_DTYPE_F16, groups, n, sdims, &ts, err)))
        return st;
    const uint32_t *w = tw.data, *z = tz.data;
    const uint16_t *s = ts.data;
    int64_t half = (k + 1) / 2;
    memset(codes, 0, (size_t)(n * half));
    if (awq) {
        for (int64_t kk = 0; kk < k; kk++)
            for (int64_t j = 0; j < n / 8; j++)
                for (int c = 0; c < 8; c++)
                    codes[(8 * j + c) * half + kk / 2] |=
                        (uint8_t)(nibble(w[kk * (n / 8) + j], awq_nibble[c]) << (4 * (kk & 1)));
    } else {
        for (int64_t kk = 0; kk < k; kk++)
            for (int64_t nn = 0; nn < n; nn++)
                codes[nn * half + kk / 2] |=
                    (uint8_t)(nibble(w[(kk / 8) * n + nn], (int)(kk % 8)) << (4 * (kk & 1)));
    }
    for (int64_t gi = 0; gi < groups; gi++)
        for (int64_t nn = 0; nn < n; nn++) {
            uint32_t word = z[gi * (n / 8) + nn / 8];
            zeros[nn * groups + gi] = (uint8_t)(nibble(word, awq ? awq_nibble[nn % 8] : (int)(nn % 8)) +
                                                (unsigned)q->zeros_minus_one);
            scales[nn * groups + gi] = mm_f16_to_f32(s[gi * n + nn]);
        }
    char name[200];
    snprintf(name, sizeof name, "%s.g_idx", prefix);
    if (awq || !mm_model_files_has(files, name)) return MM_OK;
    mm_tensor ti;
    char idims[96];
    snprintf(idims, sizeof idims, "(%s)", k_key);
    if ((st = part(files, prefix, "g_idx", MM_DTYPE_I32, -1, k, idims, &ti, err))) return st;
    const int32_t *gidx = ti.data;
    for (int64_t kk = 0; kk < k; kk++)
        if (gidx[kk] != kk / g)
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "tensor \"%s\": g_idx[%lld] = %d is not %lld / group_size = %lld (act-order, "
                           "desc_act, is not supported)",
                           name, (long long)kk, gidx[kk], (long long)kk, (long long)(kk / g));
    return MM_OK;
}

void mm_model_qlinear_to_bf16(int64_t n, int64_t k, int64_t g, const uint8_t *codes, const float *scales,
                              const uint8_t *zeros, uint16_t *out) {
    int64_t half = (k + 1) / 2, groups = (k + g - 1) / g;
    for (int64_t nn = 0; nn < n; nn++)
        for (int64_t kk = 0; kk < k; kk++) {
            int code = (codes[nn * half + kk / 2] >> (4 * (kk & 1))) & 0xF;
            int64_t gi = nn * groups + kk / g;
            /* q - z is an integer in [-16, 15], exact in F32; one F32 product, one BF16 rounding */
            out[nn * k + kk] = mm_f32_to_bf16((float)(code - (int)zeros[gi]) * scales[gi]);
        }
}

/* The UINT4 form of count experts: weight1 (2I, H) = [gate; up], weight2 (H, I), per expert. */
typedef struct quant_set {
    uint8_t *codes1, *zeros1, *codes2, *zeros2;
    float *scales1, *scales2;
} quant_set;

static void quant_set_free(quant_set *q) {
    MM_FREE_ALL(q->codes1, q->zeros1, q->codes2, q->zeros2, q->scales1, q->scales2);
}

/* names: per expert j, the gate, up and down tensor prefixes (without ".qweight"). */
mm_status mm_model_quant_experts_load(mm_model_files *files, int64_t hidden, int64_t inter, int64_t count,
                                      const char (*names)[3][160], const char *i_key, int dequant,
                                      mm_mega_moe_buffer *buffer, mm_mega_moe_weights **out, mm_error *err) {
    int64_t h = hidden, g1 = mm_model_quant_group(&files->model->quant, h),
            g2 = mm_model_quant_group(&files->model->quant, inter);
    int64_t c1 = 2 * inter * ((h + 1) / 2), c2 = h * ((inter + 1) / 2), s1 = 2 * inter * (h / g1),
            s2 = h * (inter / g2);
    size_t ncount = (size_t)count;
    quant_set q = {malloc(ncount * (size_t)c1 + 1),
                   malloc(ncount * (size_t)s1 + 1),
                   malloc(ncount * (size_t)c2 + 1),
                   malloc(ncount * (size_t)s2 + 1),
                   malloc((ncount * (size_t)s1 + 1) * sizeof(float)),
                   malloc((ncount * (size_t)s2 + 1) * sizeof(float))};
    uint16_t *bf1 = dequant ? malloc((ncount * (size_t)(2 * inter * h) + 1) * 2) : NULL;
    uint16_t *bf2 = dequant ? malloc((ncount * (size_t)(h * inter) + 1) * 2) : NULL;
    mm_tensor *lists = calloc(6 * ncount + 1, sizeof *lists);
    mm_status st = MM_OK;
    if (!q.codes1 || !q.zeros1 || !q.codes2 || !q.zeros2 || !q.scales1 || !q.scales2 || !lists ||
        (dequant && (!bf1 || !bf2)))
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "out of memory for %lld quantized experts", (long long)count);
    for (int64_t j = 0; j < count && !st; j++) {
        uint8_t *cd1 = q.codes1 + j * c1, *zr1 = q.zeros1 + j * s1, *cd2 = q.codes2 + j * c2,
                *zr2 = q.zeros2 + j * s2;
        float *sc1 = q.scales1 + j * s1, *sc2 = q.scales2 + j * s2;
        /* gate rows [0, I), up rows [I, 2I): each a whole (I, H) linear, so the halves are contiguous */
        if ((st = mm_model_qlinear_read(files, names[j][0], inter, h, i_key, "hidden_size", cd1, sc1, zr1,
                                        err)) ||
            (st = mm_model_qlinear_read(files, names[j][1], inter, h, i_key, "hidden_size", cd1 + c1 / 2,
                                        sc1 + s1 / 2, zr1 + s1 / 2, err)) ||
            (st = mm_model_qlinear_read(files, names[j][2], h, inter, "hidden_size", i_key, cd2, sc2, zr2,
                                        err)))
            break;
        int64_t w1s[2] = {2 * inter, h}, w2s[2] = {h, inter}, z1s[2] = {2 * inter, h / g1},
                z2s[2] = {h, inter / g2};
        mm_tensor *t = lists + 6 * j;
        if (dequant) {
            uint16_t *d1 = bf1 + j * 2 * inter * h, *d2 = bf2 + j * h * inter;
            mm_model_qlinear_to_bf16(2 * inter, h, g1, cd1, sc1, zr1, d1);
            mm_model_qlinear_to_bf16(h, inter, g2, cd2, sc2, zr2, d2);
            t[0] = mm_tensor_make(MM_DTYPE_BF16, 2, w1s, d1);
            t[1] = mm_tensor_make(MM_DTYPE_BF16, 2, w2s, d2);
            continue;
        }
        for (int64_t i = 0; i < s1 + s2; i++)
            if ((i < s1 ? zr1[i] : zr2[i - s1]) > 15)
                st = mm_fail(
                    err, MM_ERR_INVALID_FILE,
                    "%s: a zero point is 16 (stored 15 in the \"gptq\" v1 format, which stores zero - 1): "
                    "not a 4-bit code; run it with --weights bf16 (dequantize_to_bf16)",
                    names[j][i < s1 ? 0 : 2]);
        t[0] = mm_tensor_make(MM_DTYPE_UINT4, 2, w1s, cd1);
        t[1] = mm_tensor_make(MM_DTYPE_UINT4, 2, w2s, cd2);
        t[2] = mm_tensor_make(MM_DTYPE_F32, 2, z1s, sc1);
        t[3] = mm_tensor_make(MM_DTYPE_F32, 2, z2s, sc2);
        t[4] = mm_tensor_make(MM_DTYPE_U8, 2, z1s, zr1);
        t[5] = mm_tensor_make(MM_DTYPE_U8, 2, z2s, zr2);
    }
    if (!st) {
        /* lists of count tensors each: gather the j-th entries into six arrays */
        mm_tensor *by_kind = calloc(6 * ncount + 1, sizeof *by_kind);
        if (!by_kind) st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "out of memory for the expert lists");
        for (int64_t j = 0; j < count && !st; j++)
            for (int kind = 0; kind < 6; kind++) by_kind[kind * count + j] = lists[6 * j + kind];
        if (!st) {
            mm_mega_moe_expert_weights routed =
                mm_model_expert_lists(count, by_kind, by_kind + count, dequant ? NULL : by_kind + 2 * count,
                                      dequant ? NULL : by_kind + 3 * count);
            if (!dequant) {
                routed.weight_zeros1_list = by_kind + 4 * count;
                routed.weight_zeros2_list = by_kind + 5 * count;
                routed.scale_block_n = 1;
                routed.scale_block_k = g1;
                if (g2 != g1)
                    st = mm_fail(
                        err, MM_ERR_INVALID_FILE,
                        "%s: the group size is %lld over hidden_size but %lld over %s (one group_size "
                        "per layer is supported natively; use --weights bf16)",
                        names[0][2], (long long)g1, (long long)g2, i_key);
            }
            if (!st) st = mm_mega_moe_weights_create(buffer, &routed, NULL, out, err);
        }
        free(by_kind);
    }
    quant_set_free(&q);
    free(bf1);
    free(bf2);
    free(lists);
    return st;
}
