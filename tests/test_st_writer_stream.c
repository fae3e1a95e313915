/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_st_writer_stream.c: large outputs are streamed to the file, not copied first.
 *
 * Peak memory is read from the kernel (VmHWM in /proc/self/status, reset through /proc/self/clear_refs
 * before each measurement), so the check sees every allocation the writer or the case runner makes,
 * whatever allocator they use. Two paths: the public writer with mm_st_writer_add_ref (the data is
 * written from the caller's buffer: the peak grows by far less than the tensor), and mm_case_run on a
 * tiny re-routing case whose output expert_token_num is 64 MiB (the runner used to hand the writer a
 * copy of every output: peak = 2x the outputs; streamed, it is 1x). The files are checked byte for
 * byte against the data, so streaming changes nothing in what lands on disk. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "megamoe/case.h"
#include "megamoe/safetensors.h"
#include "testlib.h"

#define BIG_BYTES ((size_t)64 << 20)

static char dir[64], in_path[128], out_path[128];

/* The process's peak resident memory in bytes (VmHWM), or -1. */
static long long peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Lowers the peak to the current resident memory (Linux 4.0 and later). 0 on success. */
static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The writer with a borrowed tensor: the bytes written are the caller's at write time (no copy was
 * taken at add), and writing 64 MiB raises the peak by less than 8 MiB. */
static void writer_streams_borrowed_data(void) {
    mm_error err;
    unsigned char *data = malloc(BIG_BYTES);
    CHECK(data != NULL);
    if (!data) return;
    for (size_t i = 0; i < BIG_BYTES; i++) data[i] = (unsigned char)(i * 7 + (i >> 20));
    int64_t shape[1] = {(int64_t)BIG_BYTES};
    mm_tensor t = mm_tensor_make(MM_DTYPE_U8, 1, shape, data);
    mm_st_writer *w = NULL;
    CHECK_OK(mm_st_writer_create(&w, &err), &err);
    CHECK_OK(mm_st_writer_add_ref(w, "big", &t, &err), &err);
    data[0] = 0xA5; /* changed after add: a borrowed tensor is written as it is at write time */
    CHECK_EQ_INT(reset_peak(), 0);
    long long before = peak_rss();
    CHECK_OK(mm_st_writer_write(w, out_path, &err), &err);
    long long grown = peak_rss() - before;
    CHECK(before > 0);
    if (grown >= (long long)(BIG_BYTES / 8))
        mm_test_report_fail(__FILE__, __LINE__, "writing %zu bytes raised the peak by %lld bytes", BIG_BYTES,
                            grown);
    mm_st_writer_destroy(w);

    mm_st_reader *r = NULL;
    CHECK_OK(mm_st_open(out_path, &r, &err), &err);
    const mm_st_tensor_info *info = r ? mm_st_find(r, "big") : NULL;
    CHECK(info != NULL);
    if (info) {
        CHECK_EQ_INT(info->nbytes, BIG_BYTES);
        unsigned char *back = malloc(BIG_BYTES);
        CHECK(back != NULL);
        if (back) {
            CHECK_OK(mm_st_read(r, info, back, &err), &err);
            CHECK(memcmp(back, data, BIG_BYTES) == 0);
            CHECK_EQ_HEX(back[0], 0xA5);
        }
        free(back);
    }
    mm_st_close(r);
    free(data);
    unlink(out_path);
}

/* A 64 MiB output of a case: its peak stays near 1x the output (it was 2x: the writer's copy). */
static void case_output_is_not_copied(void) {
    mm_error err;
    const int64_t experts = (int64_t)(BIG_BYTES / 4);
    int64_t tshape[2] = {0, 8}, cshape[2] = {0, experts};
    mm_tensor tokens = mm_tensor_make(MM_DTYPE_BF16, 2, tshape, NULL);
    mm_tensor counts = mm_tensor_make(MM_DTYPE_I32, 2, cshape, NULL);
    mm_st_writer *w = NULL;
    CHECK_OK(mm_st_writer_create(&w, &err), &err);
    CHECK_OK(mm_st_writer_set_metadata(w, "op", "moe_re_routing", &err), &err);
    CHECK_OK(mm_st_writer_add(w, "tokens", &tokens, &err), &err);
    CHECK_OK(mm_st_writer_add(w, "expert_token_num_per_rank", &counts, &err), &err);
    CHECK_OK(mm_st_writer_write(w, in_path, &err), &err);
    mm_st_writer_destroy(w);

    mm_case_options options = {MM_CASE_BACKEND_THREADS, 0.0, 0};
    CHECK_EQ_INT(reset_peak(), 0);
    long long before = peak_rss();
    CHECK_OK(mm_case_run(in_path, out_path, &options, &err), &err);
    long long grown = peak_rss() - before;
    /* expert_token_num: (E,) of the counts' dtype, I32 */
    long long output = (long long)experts * 4;
    if (grown >= output + output / 4)
        mm_test_report_fail(__FILE__, __LINE__,
                            "a case with %lld bytes of output raised the peak by %lld bytes", output, grown);
    CHECK(grown >= output / 2); /* the measurement sees the output itself */

    mm_st_reader *r = NULL;
    CHECK_OK(mm_st_open(out_path, &r, &err), &err);
    const mm_st_tensor_info *info = r ? mm_st_find(r, "expert_token_num") : NULL;
    CHECK(info != NULL);
    if (info) CHECK_EQ_INT(info->nbytes, output);
    mm_st_close(r);
    unlink(out_path);
    unlink(in_path);
}

int main(void) {
    if (!mm_test_make_temp_dir(dir, sizeof dir, "mm_stream")) return 1;
    snprintf(in_path, sizeof in_path, "%s/in.safetensors", dir);
    snprintf(out_path, sizeof out_path, "%s/out.safetensors", dir);
    writer_streams_borrowed_data();
    case_output_is_not_copied();
    rmdir(dir);
    return mm_test_finish("st_writer_stream");
}
