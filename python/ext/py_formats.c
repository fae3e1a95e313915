/* SPDX-License-Identifier: Apache-2.0 */
/* python/ext/py_formats.c: the exact number-format functions of megamoe/formats.h over whole arrays:
 * MX block-32 quantize / dequantize, INT8 per-token quantization, INT4 packing, and element conversions
 * F32 <-> BF16 / F16 / FP8 / FP4 / E8M0. Rows are the last dimension; the Python layer allocates the
 * outputs. The GIL is released while the rows are converted. */
#include "py_common.h"

#include <string.h>

#include "megamoe/formats.h"

/* Last dimension n and the number of rows before it (a 0-d tensor is one row of one element). */
static void rows_cols(const mm_tensor *t, int64_t *rows, int64_t *n) {
    *n = t->ndim ? t->shape[t->ndim - 1] : 1;
    *rows = 1;
    for (int d = 0; d + 1 < t->ndim; d++) *rows *= t->shape[d];
}

/* Same leading dims; last dim `last` (or any when last < 0). */
static int same_rows(const mm_tensor *a, const mm_tensor *b, int64_t last, const char *what) {
    int ok = a->ndim == b->ndim && a->ndim >= 1;
    for (int d = 0; ok && d + 1 < a->ndim; d++) ok = a->shape[d] == b->shape[d];
    if (ok && last >= 0) ok = b->shape[b->ndim - 1] == last;
    if (!ok) mm_py_invalid("%s: shape does not match the input's rows", what);
    return ok ? 0 : -1;
}

static int is_mx_elem(mm_dtype d) {
    return d == MM_DTYPE_FP8_E4M3FN || d == MM_DTYPE_FP8_E5M2 || d == MM_DTYPE_FP4_E2M1;
}

static const int WRITE_LAST[3] = {0, 1, 1}, READ_READ_WRITE[3] = {0, 0, 1}, REQUIRED[3] = {0, 0, 0};

/* The arguments of the functions that take n (2 or 3) tensor specs and nothing else: parses them into
 * t (none optional) and gives the rows and last dimension of the first. Returns 0 or -1 (exception). */
static int parse_specs(PyObject *args, int n, const char *const *names, const int *writable, mm_py_tensor *t,
                       int64_t *rows, int64_t *cols) {
    PyObject *specs[3];
    if (!PyArg_ParseTuple(args, n == 3 ? "OOO" : "OO", &specs[0], &specs[1], &specs[2]) ||
        mm_py_tensors_parse(specs, names, writable, REQUIRED, n, t) < 0)
        return -1;
    rows_cols(&t[0].t, rows, cols);
    return 0;
}

static PyObject *py_mx_quantize(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[3] = {"x", "q", "scales"};
    mm_py_tensor t[3];
    int64_t rows, n;
    if (parse_specs(args, 3, names, WRITE_LAST, t, &rows, &n) < 0) return NULL;
    mm_tensor *x = &t[0].t, *q = &t[1].t, *s = &t[2].t;
    mm_error err = {0};
    mm_status st = MM_OK;
    if (x->dtype != MM_DTYPE_BF16 && x->dtype != MM_DTYPE_F32) {
        mm_py_invalid("x: dtype %s (must be bf16 or f32)", mm_dtype_name(x->dtype));
    } else if (!is_mx_elem(q->dtype)) {
        mm_py_invalid("q: dtype %s is not an MX element type (fp8_e4m3fn, fp8_e5m2, fp4_e2m1)",
                      mm_dtype_name(q->dtype));
    } else if (s->dtype != MM_DTYPE_E8M0) {
        mm_py_invalid("scales: dtype %s (must be e8m0)", mm_dtype_name(s->dtype));
    } else if (same_rows(x, q, n, "q") == 0 && same_rows(x, s, (n + 31) / 32, "scales") == 0) {
        int64_t qrow = mm_dtype_row_bytes(q->dtype, n), srow = (n + 31) / 32;
        Py_BEGIN_ALLOW_THREADS;
        for (int64_t r = 0; r < rows && st == MM_OK; r++) {
            uint8_t *qr = (uint8_t *)q->data + r * qrow, *sr = (uint8_t *)s->data + r * srow;
            if (x->dtype == MM_DTYPE_BF16)
                st = mm_mx_quantize_row_bf16((const uint16_t *)x->data + r * n, n, q->dtype, qr, sr, &err);
            else
                st = mm_mx_quantize_row_f32((const float *)x->data + r * n, n, q->dtype, qr, sr, &err);
        }
        Py_END_ALLOW_THREADS;
        if (st != MM_OK) mm_py_raise(&err, "mx_quantize");
    }
    return mm_py_tensors_finish(t, 3);
}

static PyObject *py_mx_dequantize(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[3] = {"q", "scales", "out"};
    mm_py_tensor t[3];
    int64_t rows, n;
    if (parse_specs(args, 3, names, READ_READ_WRITE, t, &rows, &n) < 0) return NULL;
    mm_tensor *q = &t[0].t, *s = &t[1].t, *o = &t[2].t;
    mm_error err = {0};
    mm_status st = MM_OK;
    if (!is_mx_elem(q->dtype)) {
        mm_py_invalid("q: dtype %s is not an MX element type", mm_dtype_name(q->dtype));
    } else if (s->dtype != MM_DTYPE_E8M0 || o->dtype != MM_DTYPE_F32) {
        mm_py_invalid("scales must be e8m0 and out f32 (got %s, %s)", mm_dtype_name(s->dtype),
                      mm_dtype_name(o->dtype));
    } else if (same_rows(q, s, (n + 31) / 32, "scales") == 0 && same_rows(q, o, n, "out") == 0) {
        int64_t qrow = mm_dtype_row_bytes(q->dtype, n), srow = (n + 31) / 32;
        Py_BEGIN_ALLOW_THREADS;
        for (int64_t r = 0; r < rows && st == MM_OK; r++)
            st =
                mm_mx_dequantize_row((const uint8_t *)q->data + r * qrow, (const uint8_t *)s->data + r * srow,
                                     n, q->dtype, (float *)o->data + r * n, &err);
        Py_END_ALLOW_THREADS;
        if (st != MM_OK) mm_py_raise(&err, "mx_dequantize");
    }
    return mm_py_tensors_finish(t, 3);
}

/* int8_quantize(x f32 (..., n), rule "div_away" | "mul_even", scale_form 0 | 1, q i8, scale f32 (...,)) */
static PyObject *py_int8_quantize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *specs[3];
    static const char *const names[3] = {"x", "q", "scale"};
    const char *rule;
    int form;
    mm_py_tensor t[3];
    if (!PyArg_ParseTuple(args, "OsiOO", &specs[0], &rule, &form, &specs[1], &specs[2])) return NULL;
    int mul_even = !strcmp(rule, "mul_even");
    if (!mul_even && strcmp(rule, "div_away"))
        return mm_py_invalid("rule '%s' (must be div_away or mul_even)", rule);
    if (form != MM_INT8_SCALE_AMAX_DIV_127 && form != MM_INT8_SCALE_INV_MUL)
        return mm_py_invalid("scale_form %d (must be 0: amax/127 or 1: 1/m)", form);
    if (mm_py_tensors_parse(specs, names, WRITE_LAST, REQUIRED, 3, t) < 0) return NULL;
    mm_tensor *x = &t[0].t, *q = &t[1].t, *s = &t[2].t;
    int64_t rows, n, srows, sn;
    rows_cols(x, &rows, &n);
    rows_cols(s, &srows, &sn);
    if (x->dtype != MM_DTYPE_F32 || q->dtype != MM_DTYPE_I8 || s->dtype != MM_DTYPE_F32)
        mm_py_invalid("int8_quantize needs x f32, q i8, scale f32 (got %s, %s, %s)", mm_dtype_name(x->dtype),
                      mm_dtype_name(q->dtype), mm_dtype_name(s->dtype));
    else if (same_rows(x, q, n, "q") == 0) {
        if (srows * sn != rows)
            mm_py_invalid("scale holds %lld values for %lld rows", (long long)(srows * sn), (long long)rows);
        else {
            Py_BEGIN_ALLOW_THREADS;
            for (int64_t r = 0; r < rows; r++) {
                const float *xr = (const float *)x->data + r * n;
                int8_t *qr = (int8_t *)q->data + r * n;
                float *sr = (float *)s->data + r;
                if (mul_even)
                    mm_int8_quantize_row_mul_even(xr, n, (mm_int8_scale_form)form, qr, sr);
                else
                    mm_int8_quantize_row_div_away(xr, n, qr, sr);
            }
            Py_END_ALLOW_THREADS;
        }
    }
    return mm_py_tensors_finish(t, 3);
}

/* int4_pack(values i8 (..., n), packed int4 (..., n)) and int4_unpack(packed, values). */
static PyObject *int4_common(PyObject *args, int pack) {
    PyObject *specs[2];
    static const char *const names[2] = {"values", "packed"};
    const int writable[2] = {!pack, pack};
    mm_py_tensor t[2];
    if (!PyArg_ParseTuple(args, "OO", pack ? &specs[0] : &specs[1], pack ? &specs[1] : &specs[0]) ||
        mm_py_tensors_parse(specs, names, writable, REQUIRED, 2, t) < 0)
        return NULL;
    mm_tensor *v = &t[0].t, *p = &t[1].t;
    int64_t rows, n;
    rows_cols(v, &rows, &n);
    mm_error err = {0};
    mm_status st = MM_OK;
    if (v->dtype != MM_DTYPE_I8 || p->dtype != MM_DTYPE_INT4)
        mm_py_invalid("values must be int8 and packed int4 (got %s, %s)", mm_dtype_name(v->dtype),
                      mm_dtype_name(p->dtype));
    else if (same_rows(v, p, n, "packed") == 0) {
        int64_t prow = mm_dtype_row_bytes(MM_DTYPE_INT4, n);
        Py_BEGIN_ALLOW_THREADS;
        for (int64_t r = 0; r < rows && st == MM_OK; r++) {
            int8_t *vr = (int8_t *)v->data + r * n;
            uint8_t *pr = (uint8_t *)p->data + r * prow;
            if (pack)
                st = mm_int4_pack(vr, n, pr, &err);
            else
                mm_int4_unpack(pr, n, vr);
        }
        Py_END_ALLOW_THREADS;
        if (st != MM_OK) mm_py_raise(&err, "int4_pack");
    }
    return mm_py_tensors_finish(t, 2);
}

static PyObject *py_int4_pack(PyObject *self, PyObject *args) {
    (void)self;
    return int4_common(args, 1);
}

static PyObject *py_int4_unpack(PyObject *self, PyObject *args) {
    (void)self;
    return int4_common(args, 0);
}

/* One element's code of a tensor of dtype d (4-bit packed per row of n). */
static uint32_t code_at(const mm_tensor *t, int64_t row, int64_t n, int64_t i) {
    int bits = mm_dtype_bits(t->dtype);
    if (bits == 4) return mm_nibble_get((const uint8_t *)t->data + row * mm_dtype_row_bytes(t->dtype, n), i);
    int64_t k = row * n + i;
    return bits == 8 ? ((const uint8_t *)t->data)[k] : ((const uint16_t *)t->data)[k];
}

static void code_set(mm_tensor *t, int64_t row, int64_t n, int64_t i, uint32_t code) {
    int bits = mm_dtype_bits(t->dtype);
    if (bits == 4) {
        uint8_t *b = (uint8_t *)t->data + row * mm_dtype_row_bytes(t->dtype, n) + (i >> 1);
        int shift = (int)(i & 1) * 4;
        *b = (uint8_t)((*b & ~(0x0F << shift)) | ((code & 0x0F) << shift));
        return;
    }
    int64_t k = row * n + i;
    if (bits == 8)
        ((uint8_t *)t->data)[k] = (uint8_t)code;
    else
        ((uint16_t *)t->data)[k] = (uint16_t)code;
}

/* The element formats this function converts: encoders exist for these (E8M0 and FP4 E1M2: decode only). */
static int codes_dtype(mm_dtype d, int encode) {
    switch (d) {
    case MM_DTYPE_BF16:
    case MM_DTYPE_F16:
    case MM_DTYPE_FP8_E4M3FN:
    case MM_DTYPE_FP8_E5M2:
    case MM_DTYPE_FP4_E2M1: return 1;
    case MM_DTYPE_E8M0:
    case MM_DTYPE_FP4_E1M2: return !encode;
    default: return 0;
    }
}

/* convert(src, dst): exactly one side is f32, the other a code format; same logical shape. */
static PyObject *py_convert(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[2] = {"src", "dst"};
    static const int writable[2] = {0, 1};
    mm_py_tensor t[2];
    int64_t rows, n;
    if (parse_specs(args, 2, names, writable, t, &rows, &n) < 0) return NULL;
    mm_tensor *s = &t[0].t, *d = &t[1].t;
    int encode = s->dtype == MM_DTYPE_F32;
    mm_tensor *codes = encode ? d : s;
    int same = s->ndim == d->ndim;
    for (int i = 0; same && i < s->ndim; i++) same = s->shape[i] == d->shape[i];
    if ((encode ? d->dtype : s->dtype) == MM_DTYPE_F32 || (!encode && d->dtype != MM_DTYPE_F32) ||
        !codes_dtype(codes->dtype, encode))
        mm_py_invalid(
            "cannot convert %s to %s (one side f32, the other bf16, f16, fp8_e4m3fn, fp8_e5m2, fp4_e2m1%s)",
            mm_dtype_name(s->dtype), mm_dtype_name(d->dtype), encode ? "" : ", e8m0, fp4_e1m2");
    else if (!same)
        mm_py_invalid("src and dst shapes differ");
    else {
        Py_BEGIN_ALLOW_THREADS;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++) {
                if (encode)
                    code_set(d, r, n, i, mm_dtype_from_f32(d->dtype, ((const float *)s->data)[r * n + i]));
                else
                    ((float *)d->data)[r * n + i] = mm_dtype_to_f32(s->dtype, code_at(s, r, n, i));
            }
        Py_END_ALLOW_THREADS;
    }
    return mm_py_tensors_finish(t, 2);
}

static PyObject *py_mx_scale_byte(PyObject *self, PyObject *args) {
    (void)self;
    float amax;
    PyObject *elem_name;
    mm_dtype elem;
    if (!PyArg_ParseTuple(args, "fO", &amax, &elem_name) || mm_py_dtype(elem_name, "elem", &elem) < 0)
        return NULL;
    return PyLong_FromLong(mm_mx_scale_byte(amax, elem));
}

static PyObject *py_dtype_info(PyObject *self, PyObject *arg) {
    (void)self;
    mm_dtype d;
    if (mm_py_dtype(arg, "dtype", &d) < 0) return NULL;
    return Py_BuildValue("(si)", mm_dtype_name(d), mm_dtype_bits(d));
}

static PyMethodDef methods[] = {
    {"mx_quantize", py_mx_quantize, METH_VARARGS,
     "mx_quantize(x, q, scales): MX block-32 rows of x into q, scales."},
    {"mx_dequantize", py_mx_dequantize, METH_VARARGS, "mx_dequantize(q, scales, out): rows back to f32."},
    {"int8_quantize", py_int8_quantize, METH_VARARGS,
     "int8_quantize(x, rule, form, q, scale): per-row INT8."},
    {"int4_pack", py_int4_pack, METH_VARARGS, "int4_pack(values, packed)."},
    {"int4_unpack", py_int4_unpack, METH_VARARGS, "int4_unpack(packed, values)."},
    {"convert", py_convert, METH_VARARGS, "convert(src, dst): element conversion, one side f32."},
    {"mx_scale_byte", py_mx_scale_byte, METH_VARARGS, "mx_scale_byte(amax, elem) -> E8M0 byte."},
    {"dtype_info", py_dtype_info, METH_O, "dtype_info(name) -> (canonical name, bits)."},
    {NULL, NULL, 0, NULL},
};

int mm_py_init_formats(PyObject *module) {
    return PyModule_AddFunctions(module, methods);
}
