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

static PyObject *py_mx_quantize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xs, *qs, *ss;
    if (!PyArg_ParseTuple(args, "OOO", &xs, &qs, &ss)) return NULL;
    mm_py_tensor x, q, s;
    if (mm_py_tensor_parse(xs, "x", 0, 0, &x) < 0) return NULL;
    if (mm_py_tensor_parse(qs, "q", 1, 0, &q) < 0) goto fail_x;
    if (mm_py_tensor_parse(ss, "scales", 1, 0, &s) < 0) goto fail_q;
    int64_t rows, n;
    rows_cols(&x.t, &rows, &n);
    mm_error err = {0};
    mm_status st = MM_OK;
    if (x.t.dtype != MM_DTYPE_BF16 && x.t.dtype != MM_DTYPE_F32) {
        mm_py_invalid("x: dtype %s (must be bf16 or f32)", mm_dtype_name(x.t.dtype));
    } else if (!is_mx_elem(q.t.dtype)) {
        mm_py_invalid("q: dtype %s is not an MX element type (fp8_e4m3fn, fp8_e5m2, fp4_e2m1)",
                      mm_dtype_name(q.t.dtype));
    } else if (s.t.dtype != MM_DTYPE_E8M0) {
        mm_py_invalid("scales: dtype %s (must be e8m0)", mm_dtype_name(s.t.dtype));
    } else if (same_rows(&x.t, &q.t, n, "q") == 0 && same_rows(&x.t, &s.t, (n + 31) / 32, "scales") == 0) {
        int64_t qrow = mm_dtype_row_bytes(q.t.dtype, n), srow = (n + 31) / 32;
        Py_BEGIN_ALLOW_THREADS;
        for (int64_t r = 0; r < rows && st == MM_OK; r++) {
            uint8_t *qr = (uint8_t *)q.t.data + r * qrow, *sr = (uint8_t *)s.t.data + r * srow;
            if (x.t.dtype == MM_DTYPE_BF16)
                st = mm_mx_quantize_row_bf16((const uint16_t *)x.t.data + r * n, n, q.t.dtype, qr, sr, &err);
            else
                st = mm_mx_quantize_row_f32((const float *)x.t.data + r * n, n, q.t.dtype, qr, sr, &err);
        }
        Py_END_ALLOW_THREADS;
        if (st != MM_OK) mm_py_raise(&err, "mx_quantize");
    }
    int failed = PyErr_Occurred() != NULL;
    mm_py_tensor_release(&s);
    mm_py_tensor_release(&q);
    mm_py_tensor_release(&x);
    if (failed) return NULL;
    Py_RETURN_NONE;
fail_q:
    mm_py_tensor_release(&q);
fail_x:
    mm_py_tensor_release(&x);
    return NULL;
}

static PyObject *py_mx_dequantize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *qs, *ss, *os;
    if (!PyArg_ParseTuple(args, "OOO", &qs, &ss, &os)) return NULL;
    mm_py_tensor q, s, o;
    if (mm_py_tensor_parse(qs, "q", 0, 0, &q) < 0) return NULL;
    if (mm_py_tensor_parse(ss, "scales", 0, 0, &s) < 0) goto fail_q;
    if (mm_py_tensor_parse(os, "out", 1, 0, &o) < 0) goto fail_s;
    int64_t rows, n;
    rows_cols(&q.t, &rows, &n);
    mm_error err = {0};
    mm_status st = MM_OK;
    if (!is_mx_elem(q.t.dtype)) {
        mm_py_invalid("q: dtype %s is not an MX element type", mm_dtype_name(q.t.dtype));
    } else if (s.t.dtype != MM_DTYPE_E8M0 || o.t.dtype != MM_DTYPE_F32) {
        mm_py_invalid("scales must be e8m0 and out f32 (got %s, %s)", mm_dtype_name(s.t.dtype),
                      mm_dtype_name(o.t.dtype));
    } else if (same_rows(&q.t, &s.t, (n + 31) / 32, "scales") == 0 && same_rows(&q.t, &o.t, n, "out") == 0) {
        int64_t qrow = mm_dtype_row_bytes(q.t.dtype, n), srow = (n + 31) / 32;
        Py_BEGIN_ALLOW_THREADS;
        for (int64_t r = 0; r < rows && st == MM_OK; r++)
            st = mm_mx_dequantize_row((const uint8_t *)q.t.data + r * qrow,
                                      (const uint8_t *)s.t.data + r * srow, n, q.t.dtype,
                                      (float *)o.t.data + r * n, &err);
        Py_END_ALLOW_THREADS;
        if (st != MM_OK) mm_py_raise(&err, "mx_dequantize");
    }
    int failed = PyErr_Occurred() != NULL;
    mm_py_tensor_release(&o);
    mm_py_tensor_release(&s);
    mm_py_tensor_release(&q);
    if (failed) return NULL;
    Py_RETURN_NONE;
fail_s:
    mm_py_tensor_release(&s);
fail_q:
    mm_py_tensor_release(&q);
    return NULL;
}

/* int8_quantize(x f32 (..., n), rule "div_away" | "mul_even", scale_form 0 | 1, q i8, scale f32 (...,)) */
static PyObject *py_int8_quantize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xs, *qs, *ss;
    const char *rule;
    int form;
    if (!PyArg_ParseTuple(args, "OsiOO", &xs, &rule, &form, &qs, &ss)) return NULL;
    int mul_even = !strcmp(rule, "mul_even");
    if (!mul_even && strcmp(rule, "div_away"))
        return mm_py_invalid("rule '%s' (must be div_away or mul_even)", rule);
    if (form != MM_INT8_SCALE_AMAX_DIV_127 && form != MM_INT8_SCALE_INV_MUL)
        return mm_py_invalid("scale_form %d (must be 0: amax/127 or 1: 1/m)", form);
    mm_py_tensor x, q, s;
    if (mm_py_tensor_parse(xs, "x", 0, 0, &x) < 0) return NULL;
    if (mm_py_tensor_parse(qs, "q", 1, 0, &q) < 0) goto fail_x;
    if (mm_py_tensor_parse(ss, "scale", 1, 0, &s) < 0) goto fail_q;
    int64_t rows, n, srows, sn;
    rows_cols(&x.t, &rows, &n);
    rows_cols(&s.t, &srows, &sn);
    if (x.t.dtype != MM_DTYPE_F32 || q.t.dtype != MM_DTYPE_I8 || s.t.dtype != MM_DTYPE_F32)
        mm_py_invalid("int8_quantize needs x f32, q i8, scale f32 (got %s, %s, %s)", mm_dtype_name(x.t.dtype),
                      mm_dtype_name(q.t.dtype), mm_dtype_name(s.t.dtype));
    else if (same_rows(&x.t, &q.t, n, "q") == 0) {
        if (srows * sn != rows)
            mm_py_invalid("scale holds %lld values for %lld rows", (long long)(srows * sn), (long long)rows);
        else {
            Py_BEGIN_ALLOW_THREADS;
            for (int64_t r = 0; r < rows; r++) {
                const float *xr = (const float *)x.t.data + r * n;
                int8_t *qr = (int8_t *)q.t.data + r * n;
                float *sr = (float *)s.t.data + r;
                if (mul_even)
                    mm_int8_quantize_row_mul_even(xr, n, (mm_int8_scale_form)form, qr, sr);
                else
                    mm_int8_quantize_row_div_away(xr, n, qr, sr);
            }
            Py_END_ALLOW_THREADS;
        }
    }
    int failed = PyErr_Occurred() != NULL;
    mm_py_tensor_release(&s);
    mm_py_tensor_release(&q);
    mm_py_tensor_release(&x);
    if (failed) return NULL;
    Py_RETURN_NONE;
fail_q:
    mm_py_tensor_release(&q);
fail_x:
    mm_py_tensor_release(&x);
    return NULL;
}

/* int4_pack(values i8 (..., n), packed int4 (..., n)) and int4_unpack(packed, values). */
static PyObject *int4_common(PyObject *args, int pack) {
    PyObject *vs, *ps;
    if (!PyArg_ParseTuple(args, "OO", pack ? &vs : &ps, pack ? &ps : &vs)) return NULL;
    mm_py_tensor v, p;
    if (mm_py_tensor_parse(vs, "values", !pack, 0, &v) < 0) return NULL;
    if (mm_py_tensor_parse(ps, "packed", pack, 0, &p) < 0) {
        mm_py_tensor_release(&v);
        return NULL;
    }
    int64_t rows, n;
    rows_cols(&v.t, &rows, &n);
    mm_error err = {0};
    mm_status st = MM_OK;
    if (v.t.dtype != MM_DTYPE_I8 || p.t.dtype != MM_DTYPE_INT4)
        mm_py_invalid("values must be i8 and packed int4 (got %s, %s)", mm_dtype_name(v.t.dtype),
                      mm_dtype_name(p.t.dtype));
    else if (same_rows(&v.t, &p.t, n, "packed") == 0) {
        int64_t prow = mm_dtype_row_bytes(MM_DTYPE_INT4, n);
        Py_BEGIN_ALLOW_THREADS;
        for (int64_t r = 0; r < rows && st == MM_OK; r++) {
            int8_t *vr = (int8_t *)v.t.data + r * n;
            uint8_t *pr = (uint8_t *)p.t.data + r * prow;
            if (pack)
                st = mm_int4_pack(vr, n, pr, &err);
            else
                mm_int4_unpack(pr, n, vr);
        }
        Py_END_ALLOW_THREADS;
        if (st != MM_OK) mm_py_raise(&err, "int4_pack");
    }
    int failed = PyErr_Occurred() != NULL;
    mm_py_tensor_release(&p);
    mm_py_tensor_release(&v);
    if (failed) return NULL;
    Py_RETURN_NONE;
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
    PyObject *ss, *ds;
    if (!PyArg_ParseTuple(args, "OO", &ss, &ds)) return NULL;
    mm_py_tensor s, d;
    if (mm_py_tensor_parse(ss, "src", 0, 0, &s) < 0) return NULL;
    if (mm_py_tensor_parse(ds, "dst", 1, 0, &d) < 0) {
        mm_py_tensor_release(&s);
        return NULL;
    }
    int encode = s.t.dtype == MM_DTYPE_F32;
    mm_tensor *codes = encode ? &d.t : &s.t;
    int64_t rows, n;
    rows_cols(&s.t, &rows, &n);
    int same = s.t.ndim == d.t.ndim;
    for (int i = 0; same && i < s.t.ndim; i++) same = s.t.shape[i] == d.t.shape[i];
    if ((encode ? d.t.dtype : s.t.dtype) == MM_DTYPE_F32 || (!encode && d.t.dtype != MM_DTYPE_F32) ||
        !codes_dtype(codes->dtype, encode))
        mm_py_invalid(
            "cannot convert %s to %s (one side f32, the other bf16, f16, fp8_e4m3fn, fp8_e5m2, fp4_e2m1%s)",
            mm_dtype_name(s.t.dtype), mm_dtype_name(d.t.dtype), encode ? "" : ", e8m0, fp4_e1m2");
    else if (!same)
        mm_py_invalid("src and dst shapes differ");
    else {
        Py_BEGIN_ALLOW_THREADS;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++) {
                if (encode)
                    code_set(&d.t, r, n, i,
                             mm_dtype_from_f32(d.t.dtype, ((const float *)s.t.data)[r * n + i]));
                else
                    ((float *)d.t.data)[r * n + i] = mm_dtype_to_f32(s.t.dtype, code_at(&s.t, r, n, i));
            }
        Py_END_ALLOW_THREADS;
    }
    int failed = PyErr_Occurred() != NULL;
    mm_py_tensor_release(&d);
    mm_py_tensor_release(&s);
    if (failed) return NULL;
    Py_RETURN_NONE;
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
