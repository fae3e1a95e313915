/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_safetensors.c: writer -> reader round trips for every dtype (logical ones, 0-d and empty
 * tensors included), the exact bytes of a small file in the standard layout, the writer's argument
 * rules, and the atomicity of writes (a failed write leaves an existing file as it was). */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "megamoe/safetensors.h"
#include "testlib.h"

static char tmpdir[64];

static void path_in_tmp(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* Number of directory entries whose name contains ".tmp." (left-over temporary files). */
static int count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

typedef struct spec {
    const char *name;
    mm_dtype dtype;
    int ndim;
    int64_t shape[MM_MAX_DIMS];
} spec;

static void test_round_trip(void) {
    mm_error err_store, *err = &err_store;
    mm_error_clear(err);
    spec specs[64];
    size_t n = 0;
    static char names[MM_DTYPE_COUNT][32];
    /* Every dtype with an odd last dimension (the 4-bit packing case). */
    for (int d = MM_DTYPE_INVALID + 1; d < MM_DTYPE_COUNT; d++) {
        snprintf(names[d], sizeof names[d], "t.%s", mm_dtype_name((mm_dtype)d));
        specs[n++] = (spec){names[d], (mm_dtype)d, 2, {3, 5}};
    }
    specs[n++] = (spec){"scalar_f32", MM_DTYPE_F32, 0, {0}};
    specs[n++] = (spec){"scalar_int4", MM_DTYPE_INT4, 0, {0}};
    specs[n++] = (spec){"scalar_f4", MM_DTYPE_FP4_E2M1, 0, {0}};
    specs[n++] = (spec){"empty_bf16", MM_DTYPE_BF16, 2, {0, 4}};
    specs[n++] = (spec){"empty_int4", MM_DTYPE_INT4, 2, {2, 0}};
    specs[n++] = (spec){"empty_hif8", MM_DTYPE_HIFLOAT8, 1, {0}};
    specs[n++] = (spec){"eight_dims", MM_DTYPE_I16, 8, {1, 2, 1, 2, 1, 2, 1, 3}};
    specs[n++] = (spec){"fp4_e1m2_even", MM_DTYPE_FP4_E1M2, 3, {2, 1, 6}};
    specs[n++] = (spec){"we\"ird\\name\n\x01/\xc3\xa9", MM_DTYPE_U8, 1, {3}};

    mm_st_writer *w = NULL;
    CHECK_OK(mm_st_writer_create(&w, err), err);
    CHECK_OK(mm_st_writer_set_metadata(w, "op", "moe_re_routing", err), err);
    CHECK_OK(mm_st_writer_set_metadata(w, "note", "quote \" backslash \\ newline \n tab \t", err), err);
    CHECK_OK(mm_st_writer_set_metadata(w, "op", "mega_moe", err), err); /* replaces */
    unsigned char *data[64];
    int64_t nbytes[64];
    uint64_t seed = 42;
    for (size_t i = 0; i < n; i++) {
        mm_tensor t = mm_tensor_make(specs[i].dtype, specs[i].ndim, specs[i].shape, NULL);
        nbytes[i] = mm_tensor_nbytes(&t);
        data[i] = malloc((size_t)nbytes[i] + 1);
        for (int64_t b = 0; b < nbytes[i]; b++) data[i][b] = (unsigned char)mm_test_rand_u64(&seed);
        t.data = nbytes[i] ? data[i] : NULL;
        CHECK_OK(mm_st_writer_add(w, specs[i].name, &t, err), err);
    }
    char path[128];
    path_in_tmp(path, sizeof path, "round_trip.safetensors");
    CHECK_OK(mm_st_writer_write(w, path, err), err);
    mm_st_writer_destroy(w);
    CHECK_EQ_INT(count_temp_files(tmpdir), 0);

    /* The data starts at a multiple of 8. */
    size_t size = 0;
    unsigned char *file = mm_test_read_file(path, &size);
    uint64_t header_len = 0;
    for (int i = 7; file && i >= 0; i--) header_len = header_len << 8 | file[i];
    CHECK_EQ_INT(header_len % 8, 0);
    CHECK(file && file[8] == '{' && memcmp(file + 8, "{\"__metadata__\":{", 17) == 0); /* metadata first */
    free(file);

    mm_st_reader *r = NULL;
    CHECK_OK(mm_st_open(path, &r, err), err);
    if (!r) return;
    CHECK_EQ_INT(mm_st_tensor_count(r), n);
    uint64_t expected_offset = 8 + header_len;
    for (size_t i = 0; i < n; i++) {
        const mm_st_tensor_info *info = mm_st_find(r, specs[i].name);
        CHECK(info != NULL);
        if (!info) continue;
        CHECK_EQ_INT(info->dtype, specs[i].dtype);
        CHECK_EQ_INT(info->ndim, specs[i].ndim);
        for (int d = 0; d < specs[i].ndim; d++) CHECK_EQ_INT(info->shape[d], specs[i].shape[d]);
        CHECK_EQ_INT(info->nbytes, nbytes[i]);
        CHECK_EQ_INT(info->offset, expected_offset); /* laid out in insertion order */
        expected_offset += (uint64_t)nbytes[i];
        mm_tensor t;
        CHECK_OK(mm_st_read_tensor(r, specs[i].name, &t, err), err);
        CHECK(t.data != NULL && ((uintptr_t)t.data % 64) == 0);
        CHECK_EQ_INT(t.dtype, specs[i].dtype);
        CHECK_EQ_INT(mm_tensor_nbytes(&t), nbytes[i]);
        CHECK(nbytes[i] == 0 || memcmp(t.data, data[i], (size_t)nbytes[i]) == 0);
        mm_tensor_free_data(&t);
        CHECK(t.data == NULL);
        free(data[i]);
    }
    CHECK(strcmp(mm_st_metadata(r, "op"), "mega_moe") == 0);
    CHECK(strcmp(mm_st_metadata(r, "note"), "quote \" backslash \\ newline \n tab \t") == 0);
    /* The writer named the logical dtypes and the 4-bit logical shapes in the metadata. */
    CHECK(strcmp(mm_st_metadata(r, "dtype.t.int4"), "int4") == 0);
    CHECK(strcmp(mm_st_metadata(r, "shape.t.int4"), "[3,5]") == 0);
    CHECK(strcmp(mm_st_metadata(r, "dtype.t.hifloat8"), "hifloat8") == 0);
    CHECK(mm_st_metadata(r, "shape.t.hifloat8") == NULL);
    CHECK(strcmp(mm_st_metadata(r, "dtype.t.fp4_e1m2"), "fp4_e1m2") == 0);
    CHECK(strcmp(mm_st_metadata(r, "shape.scalar_int4"), "[]") == 0);
    CHECK(strcmp(mm_st_metadata(r, "shape.empty_int4"), "[2,0]") == 0);
    CHECK(strcmp(mm_st_metadata(r, "dtype.t.uint4"), "uint4") == 0);
    CHECK(mm_st_metadata(r, "dtype.t.fp4_e2m1") == NULL); /* F4 is a standard string */
    /* op, note; dtype.+shape. for t.int4, t.uint4, t.fp4_e1m2, scalar_int4, empty_int4, fp4_e1m2_even;
     * dtype. for t.hifloat8, empty_hif8. */
    CHECK_EQ_INT(mm_st_metadata_count(r), 2 + 6 * 2 + 2);

    /* Reader API misuse. */
    mm_tensor t;
    CHECK_STATUS(mm_st_read_tensor(r, "absent", &t, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "tensor \"absent\" is not in the file");
    mm_st_tensor_info foreign = *mm_st_tensor_at(r, 0);
    unsigned char buf[64];
    CHECK_STATUS(mm_st_read(r, &foreign, buf, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "info does not belong to this reader");
    CHECK_STATUS(mm_st_read(r, mm_st_find(r, "t.f32"), NULL, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK(mm_st_find(r, "t.f3") == NULL && mm_st_find(r, "t.f320") == NULL);
    mm_st_close(r);
}

/* The exact bytes of the standard layout, written out by hand. */
static void test_exact_bytes(void) {
    mm_error err_store, *err = &err_store;
    mm_st_writer *w = NULL;
    CHECK_OK(mm_st_writer_create(&w, err), err);
    float values[2] = {1.0f, -2.0f};
    int64_t shape[1] = {2};
    mm_tensor t = mm_tensor_make(MM_DTYPE_F32, 1, shape, values);
    CHECK_OK(mm_st_writer_add(w, "a", &t, err), err);
    char path[128];
    path_in_tmp(path, sizeof path, "exact.safetensors");
    CHECK_OK(mm_st_writer_write(w, path, err), err);
    static const char header[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}  ";
    CHECK_EQ_INT(sizeof header - 1, 56); /* 54 bytes of JSON padded with 2 spaces */
    unsigned char expect[8 + 56 + 8] = {56, 0, 0, 0, 0, 0, 0, 0};
    memcpy(expect + 8, header, 56);
    static const unsigned char data[8] = {0x00, 0x00, 0x80, 0x3f,
                                          0x00, 0x00, 0x00, 0xc0}; /* 1.0f, -2.0f LE */
    memcpy(expect + 64, data, 8);
    size_t size = 0;
    unsigned char *file = mm_test_read_file(path, &size);
    CHECK_EQ_INT(size, sizeof expect);
    CHECK(file && size == sizeof expect && memcmp(file, expect, size) == 0);
    free(file);

    /* With metadata, a logical dtype and a second tensor: metadata keys sorted, then insertion order. */
    CHECK_OK(mm_st_writer_set_metadata(w, "op", "x", err), err);
    unsigned char packed[2] = {0x21, 0x03}; /* int4 [3]: 1, 2, 3 */
    int64_t shape3[1] = {3};
    mm_tensor q = mm_tensor_make(MM_DTYPE_INT4, 1, shape3, packed);
    CHECK_OK(mm_st_writer_add(w, "q", &q, err), err);
    CHECK_OK(mm_st_writer_write(w, path, err), err);
    static const char header2[] = "{\"__metadata__\":{\"dtype.q\":\"int4\",\"op\":\"x\",\"shape.q\":\"[3]\"},"
                                  "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                  "\"q\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[8,10]}}";
    size_t json_len = sizeof header2 - 1, padded = (json_len + 7) / 8 * 8;
    file = mm_test_read_file(path, &size);
    CHECK_EQ_INT(size, 8 + padded + 10);
    CHECK(file && file[0] == padded && memcmp(file + 8, header2, json_len) == 0);
    for (size_t i = json_len; file && i < padded; i++) CHECK_EQ_INT(file[8 + i], ' ');
    CHECK(file && memcmp(file + 8 + padded, data, 8) == 0 && memcmp(file + 8 + padded + 8, packed, 2) == 0);
    free(file);
    mm_st_writer_destroy(w);
}

static void test_writer_rules(void) {
    mm_error err_store, *err = &err_store;
    mm_st_writer *w = NULL;
    CHECK_OK(mm_st_writer_create(&w, err), err);
    unsigned char bytes[16] = {0};
    int64_t shape[2] = {2, 3};
    mm_tensor t = mm_tensor_make(MM_DTYPE_U8, 2, shape, bytes);
    CHECK_OK(mm_st_writer_add(w, "x", &t, err), err);
    CHECK_STATUS(mm_st_writer_add(w, "x", &t, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "tensor \"x\" was already added (names must be unique)");
    CHECK_STATUS(mm_st_writer_add(w, "", &t, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "tensor name is empty");
    CHECK_STATUS(mm_st_writer_add(w, "__metadata__", &t, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "reserved for the metadata");
    CHECK_STATUS(mm_st_writer_add(w, "bad\xff", &t, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "tensor name \"bad\\xff\" is not valid UTF-8");
    mm_tensor neg = t;
    neg.shape[1] = -3;
    CHECK_STATUS(mm_st_writer_add(w, "neg", &neg, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "tensor \"neg\": shape[1] = -3 is negative");
    mm_tensor nodata = t;
    nodata.data = NULL;
    CHECK_STATUS(mm_st_writer_add(w, "nodata", &nodata, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "tensor \"nodata\": data is NULL for 6 bytes");
    mm_tensor baddtype = t;
    baddtype.dtype = MM_DTYPE_COUNT;
    CHECK_STATUS(mm_st_writer_add(w, "bd", &baddtype, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "is not a valid mm_dtype");
    mm_tensor badndim = t;
    badndim.ndim = 9;
    CHECK_STATUS(mm_st_writer_add(w, "bn", &badndim, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "tensor \"bn\": ndim = 9 is outside [0, 8]");
    int64_t huge[2] = {INT64_MAX / 2, 4};
    mm_tensor big = mm_tensor_make(MM_DTYPE_F32, 2, huge, bytes);
    CHECK_STATUS(mm_st_writer_add(w, "big", &big, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "overflows 64 bits");
    CHECK_STATUS(mm_st_writer_set_metadata(w, "dtype.x", "int4", err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "metadata key \"dtype.x\" is reserved");
    CHECK_STATUS(mm_st_writer_set_metadata(w, "shape.x", "[1]", err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STATUS(mm_st_writer_set_metadata(w, "", "v", err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STATUS(mm_st_writer_set_metadata(w, "k", "\xc0\x80", err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "metadata \"k\": key or value is not valid UTF-8");
    /* Only the first tensor was added. */
    char path[128];
    path_in_tmp(path, sizeof path, "rules.safetensors");
    CHECK_OK(mm_st_writer_write(w, path, err), err);
    mm_st_reader *r = NULL;
    CHECK_OK(mm_st_open(path, &r, err), err);
    CHECK_EQ_INT(mm_st_tensor_count(r), 1);
    mm_st_close(r);
    mm_st_writer_destroy(w);

    /* Empty file: "{}" padded to 8. */
    CHECK_OK(mm_st_writer_create(&w, err), err);
    CHECK_OK(mm_st_writer_write(w, path, err), err);
    mm_st_writer_destroy(w);
    size_t size = 0;
    unsigned char *file = mm_test_read_file(path, &size);
    CHECK(file && size == 16 && file[0] == 8 && memcmp(file + 8, "{}      ", 8) == 0);
    free(file);
}

static void test_writer_atomicity(void) {
    mm_error err_store, *err = &err_store;
    mm_st_writer *w = NULL;
    CHECK_OK(mm_st_writer_create(&w, err), err);
    static unsigned char big[256 * 1024];
    int64_t shape[1] = {sizeof big};
    mm_tensor t = mm_tensor_make(MM_DTYPE_U8, 1, shape, big);
    CHECK_OK(mm_st_writer_add(w, "big", &t, err), err);

    /* A directory that does not exist: nothing is created. */
    char path[160];
    path_in_tmp(path, sizeof path, "no/such/dir/out.safetensors");
    CHECK_STATUS(mm_st_writer_write(w, path, err), MM_ERR_IO, err);
    CHECK_STR_CONTAINS(err->message, "cannot create a temporary file beside");
    CHECK_STR_CONTAINS(err->message, "No such file or directory");

    /* The target is a non-empty directory: the rename fails, the directory and its content stay,
     * the temporary file is removed. */
    char dir[160], inner[200];
    path_in_tmp(dir, sizeof dir, "occupied");
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(inner, sizeof inner, "%s/keep", dir);
    write_file(inner, "keep");
    CHECK_STATUS(mm_st_writer_write(w, dir, err), MM_ERR_IO, err);
    CHECK_STR_CONTAINS(err->message, "cannot rename the temporary file onto");
    struct stat sb;
    CHECK(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode));
    size_t size = 0;
    unsigned char *kept = mm_test_read_file(inner, &size);
    CHECK(kept && size == 4 && memcmp(kept, "keep", 4) == 0);
    free(kept);
    CHECK_EQ_INT(count_temp_files(tmpdir), 0);

    /* A write that fails part-way (file size limit: EFBIG) leaves the existing target untouched. */
    char target[160];
    path_in_tmp(target, sizeof target, "existing.safetensors");
    write_file(target, "previous content");
    CHECK(chmod(target, 0640) == 0);
    struct rlimit old_limit, small_limit;
    CHECK(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    small_limit = old_limit;
    small_limit.rlim_cur = 4096;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small_limit) == 0);
    mm_status st = mm_st_writer_write(w, target, err);
    CHECK(setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    signal(SIGXFSZ, old_handler);
    CHECK_STATUS(st, MM_ERR_IO, err);
    CHECK_STR_CONTAINS(err->message, "cannot write");
    CHECK_STR_CONTAINS(err->message, "File too large");
    unsigned char *previous = mm_test_read_file(target, &size);
    CHECK(previous && size == 16 && memcmp(previous, "previous content", 16) == 0);
    free(previous);
    CHECK_EQ_INT(count_temp_files(tmpdir), 0);

    /* A successful write replaces the file and keeps its mode. */
    CHECK_OK(mm_st_writer_write(w, target, err), err);
    CHECK(stat(target, &sb) == 0 && (sb.st_mode & 0777) == 0640);
    static const char big_header[] =
        "{\"big\":{\"dtype\":\"U8\",\"shape\":[262144],\"data_offsets\":[0,262144]}}";
    CHECK_EQ_INT(sb.st_size, 8 + (sizeof big_header - 1 + 7) / 8 * 8 + sizeof big);
    mm_st_writer_destroy(w);

    /* Reader I/O errors. */
    mm_st_reader *r = NULL;
    CHECK_STATUS(mm_st_open(path, &r, err), MM_ERR_IO, err);
    CHECK_STR_CONTAINS(err->message, "cannot open");
    CHECK_STR_CONTAINS(err->message, "No such file or directory");
    CHECK_STATUS(mm_st_open(dir, &r, err), MM_ERR_IO, err);
    CHECK_STR_CONTAINS(err->message, "Is a directory");
    CHECK(r == NULL);
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(void) {
    if (!mm_test_make_temp_dir(tmpdir, sizeof tmpdir, "megamoe_test_st")) return 1;
    test_round_trip();
    test_exact_bytes();
    test_writer_rules();
    test_writer_atomicity();
    remove_tree(tmpdir);
    return mm_test_finish("test_safetensors");
}
