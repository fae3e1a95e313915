/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_dtype.c: dtype names, sizes and tensor byte counts (including packed 4-bit rows). */
#include "megamoe/dtype.h"
#include "testlib.h"

int main(void) {
    CHECK(strcmp(mm_dtype_name(MM_DTYPE_BF16), "bf16") == 0);
    CHECK(strcmp(mm_dtype_name(MM_DTYPE_COUNT), "invalid") == 0);
    CHECK_EQ_INT(mm_dtype_from_name("F8_E4M3"), MM_DTYPE_FP8_E4M3FN);
    CHECK_EQ_INT(mm_dtype_from_name("F4"), MM_DTYPE_FP4_E2M1);
    CHECK_EQ_INT(mm_dtype_from_name("int4"), MM_DTYPE_INT4);
    CHECK_EQ_INT(mm_dtype_from_name("nope"), MM_DTYPE_INVALID);
    CHECK_EQ_INT(mm_dtype_bits(MM_DTYPE_FP4_E1M2), 4);
    CHECK_EQ_INT(mm_dtype_row_bytes(MM_DTYPE_INT4, 7), 4);
    CHECK_EQ_INT(mm_dtype_row_bytes(MM_DTYPE_BF16, 7), 14);

    int64_t shape[3] = {2, 3, 5};
    mm_tensor t = mm_tensor_make(MM_DTYPE_FP4_E2M1, 3, shape, NULL);
    CHECK_EQ_INT(mm_tensor_numel(&t), 30);
    CHECK_EQ_INT(mm_tensor_nbytes(&t), 2 * 3 * 3); /* 5 nibbles -> 3 bytes per row */
    t.dtype = MM_DTYPE_F32;
    CHECK_EQ_INT(mm_tensor_nbytes(&t), 120);
    int64_t huge[2] = {INT64_MAX / 2, 4};
    mm_tensor h = mm_tensor_make(MM_DTYPE_F32, 2, huge, NULL);
    CHECK_EQ_INT(mm_tensor_nbytes(&h), -1);
    return mm_test_finish("test_dtype");
}
