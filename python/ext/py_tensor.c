/* SPDX-License-Identifier: Apache-2.0 */
/* python/ext/py_tensor.c: tensor arguments, MegaMoE attributes and expert-weight groups from Python
 * objects.
 *
 * A tensor argument is (buffer, dtype_name, shape): the buffer gives the bytes (numpy arrays, torch
 * tensors through .numpy(), bytearray: zero copy), the dtype name and shape say what they hold, so a
 * BF16 tensor can arrive as a uint16 view and a packed 4-bit tensor as bytes. Every check that protects
 * memory is here: C-contiguous, the exact byte count, an item size (and kind) that fits the dtype. */
#include "py_common.h"

#include <stddef.h>
#include <string.h>

#include "megamoe/mega_moe.h"

int mm_py_dtype(PyObject *name_obj, const char *name, mm_dtype *out) {
    const char *s = PyUnicode_Check(name_obj) ? PyUnicode_AsUTF8(name_obj) : NULL;
    if (!s) {
        PyErr_Clear();
        mm_py_invalid("%s: dtype must be a name such as 'bf16' (got a %s)", name, Py_TYPE(name_obj)->tp_name);
        return -1;
    }
    mm_dtype d = mm_dtype_from_name(s);
    if (d == MM_DTYPE_INVALID) {
        mm_py_invalid("%s: unknown dtype '%s'", name, s);
        return -1;
    }
    *out = d;
    return 0;
}

/* The kind of the buffer's items: 'f' float, 'i' integer or bool, '?' unknown format. */
static char format_kind(const char *format) {
    if (!format) return 'i'; /* plain bytes */
    while (*format == '@' || *format == '=' || *format == '<' || *format == '>' || *format == '!') format++;
    if (strlen(format) != 1) return '?';
    return strchr("efd", *format) ? 'f' : strchr("bBhHiIlLqQ?c", *format) ? 'i' : '?';
}

/* Which buffer item kind each dtype accepts: floats for F16/F32/F64, integers for everything stored
 * as codes (BF16 as uint16/int16, FP8, E8M0, the packed 4-bit types, the integer types). */
static int kind_fits(mm_dtype d, char kind) {
    int float_dtype = d == MM_DTYPE_F16 || d == MM_DTYPE_F32 || d == MM_DTYPE_F64;
    return float_dtype ? kind == 'f' : kind == 'i';
}

int mm_py_tensor_parse(PyObject *spec, const char *name, int writable, int optional, mm_py_tensor *out) {
    memset(out, 0, sizeof *out);
    if (spec == Py_None || !spec) {
        if (optional) return 0;
        mm_py_invalid("%s is required (got None)", name);
        return -1;
    }
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 3) {
        mm_py_invalid("%s: expected (buffer, dtype, shape)", name);
        return -1;
    }
    mm_dtype dtype;
    if (mm_py_dtype(PyTuple_GET_ITEM(spec, 1), name, &dtype) < 0) return -1;
    PyObject *shape = PyTuple_GET_ITEM(spec, 2);
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > MM_MAX_DIMS) {
        mm_py_invalid("%s: shape must be a tuple of at most %d ints", name, MM_MAX_DIMS);
        return -1;
    }
    int64_t dims[MM_MAX_DIMS];
    int ndim = (int)PyTuple_GET_SIZE(shape);
    for (int i = 0; i < ndim; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0) {
            mm_py_invalid("%s: shape[%d] = %lld is negative", name, i, v);
            return -1;
        }
        dims[i] = v;
    }
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(spec, 0), &out->view, flags) < 0) {
        PyErr_Clear();
        mm_py_invalid("%s: needs a C-contiguous%s buffer (numpy array, contiguous CPU tensor); got a %s",
                      name, writable ? ", writable" : "", Py_TYPE(PyTuple_GET_ITEM(spec, 0))->tp_name);
        return -1;
    }
    out->held = 1;
    out->present = 1;
    out->t = mm_tensor_make(dtype, ndim, dims, out->view.buf);
    int64_t nbytes = mm_tensor_nbytes(&out->t);
    int bits = mm_dtype_bits(dtype);
    int want_item = bits <= 8 ? 1 : bits / 8;
    const char *problem = NULL;
    if (nbytes < 0)
        problem = "its size overflows";
    else if (out->view.itemsize != want_item)
        problem = "its item size does not fit the dtype";
    else if (!kind_fits(dtype, format_kind(out->view.format)))
        problem = "its item kind (float / integer) does not fit the dtype";
    else if (out->view.len != nbytes)
        problem = "its byte count does not match the shape";
    if (problem) {
        mm_py_invalid("%s: buffer of %zd bytes (item size %zd, format '%s') cannot hold %s of %d dims: %s",
                      name, out->view.len, out->view.itemsize, out->view.format ? out->view.format : "B",
                      mm_dtype_name(dtype), ndim, problem);
        mm_py_tensor_release(out);
        return -1;
    }
    return 0;
}

void mm_py_tensor_release(mm_py_tensor *t) {
    if (t->held) PyBuffer_Release(&t->view);
    t->held = 0;
}

int mm_py_tensors_parse(PyObject *const *specs, const char *const *names, const int *writable,
                        const int *optional, int n, mm_py_tensor *out) {
    for (int i = 0; i < n; i++)
        if (mm_py_tensor_parse(specs[i], names[i], writable[i], optional[i], &out[i]) < 0) {
            for (int j = 0; j < i; j++) mm_py_tensor_release(&out[j]);
            return -1;
        }
    return 0;
}

PyObject *mm_py_tensors_finish(mm_py_tensor *t, int n) {
    for (int i = 0; i < n; i++) mm_py_tensor_release(&t[i]);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

PyObject *mm_py_enter(PyObject *self, PyObject *unused) {
    (void)unused;
    return Py_NewRef(self);
}

PyObject *mm_py_exit(PyObject *self, PyObject *args) {
    (void)args;
    return PyObject_CallMethod(self, "close", NULL);
}

int mm_py_add_class(PyObject *module, PyTypeObject *type, const char *name, const char *doc, Py_ssize_t size,
                    int subclassable, initproc init, destructor dealloc, PyMethodDef *methods,
                    PyGetSetDef *getset) {
    *type = (PyTypeObject){PyVarObject_HEAD_INIT(NULL, 0).tp_name = name,
                           .tp_basicsize = size,
                           .tp_flags = Py_TPFLAGS_DEFAULT | (subclassable ? Py_TPFLAGS_BASETYPE : 0),
                           .tp_doc = doc,
                           .tp_new = init ? PyType_GenericNew : NULL,
                           .tp_init = init,
                           .tp_dealloc = dealloc,
                           .tp_methods = methods,
                           .tp_getset = getset};
    if (PyType_Ready(type) < 0) return -1;
    return PyModule_AddObjectRef(module, strrchr(name, '.') + 1, (PyObject *)type);
}

/* ---- attributes ----------------------------------------------------------------------------- */

/* The attributes that are a number or a dtype name (None: MM_DTYPE_INVALID), where each is stored. */
enum { ATTR_INT, ATTR_INT64, ATTR_DTYPE };
#define ATTR(kind, field)                                                                                    \
    { #field, kind, offsetof(mm_mega_moe_attrs, field) }
static const struct {
    const char *name;
    int kind;
    size_t offset;
} plain_attrs[] = {
    ATTR(ATTR_DTYPE, dispatch_quant_out_dtype), ATTR(ATTR_DTYPE, shared_expert_quant_out_dtype),
    ATTR(ATTR_DTYPE, activation_out_dtype),     ATTR(ATTR_INT, dispatch_quant_mode),
    ATTR(ATTR_INT, combine_quant_mode),         ATTR(ATTR_INT, topk_weights_type),
    ATTR(ATTR_INT, combine_comm_mode),          ATTR(ATTR_INT64, rank_num_per_server)};
#undef ATTR

/* Stores value into attribute i of plain_attrs in *a. Returns 0 or -1 with an exception set. */
static int attr_plain(PyObject *value, size_t i, mm_mega_moe_attrs *a) {
    void *field = (char *)a + plain_attrs[i].offset;
    const char *key = plain_attrs[i].name;
    if (plain_attrs[i].kind == ATTR_DTYPE) {
        if (value != Py_None) return mm_py_dtype(value, key, field);
        *(mm_dtype *)field = MM_DTYPE_INVALID;
        return 0;
    }
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        mm_py_invalid("attribute %s must be an int", key);
        return -1;
    }
    if (plain_attrs[i].kind == ATTR_INT64)
        *(int64_t *)field = v;
    else
        *(int *)field = (int)v;
    return 0;
}

/* activation_params: a sequence of up to MM_MEGA_MOE_MAX_ACTIVATION_PARAMS floats. */
static int attr_activation_params(PyObject *value, mm_mega_moe_attrs *a) {
    PyObject *seq = PySequence_Fast(value, "activation_params must be a sequence of floats");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int st = 0;
    if (n > MM_MEGA_MOE_MAX_ACTIVATION_PARAMS) {
        mm_py_invalid("activation_params has %zd values (at most %d)", n, MM_MEGA_MOE_MAX_ACTIVATION_PARAMS);
        st = -1;
    }
    for (Py_ssize_t i = 0; i < n && st == 0; i++) {
        double d = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (d == -1.0 && PyErr_Occurred()) st = -1;
        a->activation_params[i] = (float)d;
    }
    if (st == 0) a->activation_param_count = (int)n;
    Py_DECREF(seq);
    return st;
}

int mm_py_attrs_parse(PyObject *dict, mm_mega_moe_attrs *a) {
    *a = mm_mega_moe_default_attrs();
    if (!dict || dict == Py_None) return 0;
    if (!PyDict_Check(dict)) {
        mm_py_invalid("attrs must be a dict");
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!k) {
            mm_py_invalid("attrs: keys must be strings");
            return -1;
        }
        size_t i = 0;
        while (i < sizeof plain_attrs / sizeof plain_attrs[0] && strcmp(k, plain_attrs[i].name)) i++;
        if (i < sizeof plain_attrs / sizeof plain_attrs[0]) {
            if (attr_plain(value, i, a) < 0) return -1;
        } else if (!strcmp(k, "activation")) {
            const char *s = PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : NULL;
            int act = s ? mm_mega_moe_activation_from_name(s) : -1;
            if (act < 0) {
                mm_py_invalid("attribute activation: unknown activation %R", value);
                return -1;
            }
            a->activation = (mm_mega_moe_activation)act;
        } else if (!strcmp(k, "activation_params")) {
            if (attr_activation_params(value, a) < 0) return -1;
        } else {
            mm_py_invalid("attrs: unknown attribute '%s'", k);
            return -1;
        }
    }
    return 0;
}

/* ---- expert weights ------------------------------------------------------------------------- */

static int weight_entry(PyObject *dict, const char *group, const char *key, int optional, mm_py_tensor *t) {
    char name[96];
    snprintf(name, sizeof name, "%s %s", group, key);
    PyObject *spec = PyDict_GetItemString(dict, key); /* borrowed; NULL when absent */
    return mm_py_tensor_parse(spec, name, 0, optional, t);
}

int mm_py_expert_weights_parse(PyObject *dict, const char *group, mm_py_expert_weights *out) {
    memset(out, 0, sizeof *out);
    if (!dict || dict == Py_None) return 0;
    if (!PyDict_Check(dict)) {
        mm_py_invalid("%s weights must be a dict", group);
        return -1;
    }
    static const char *const known[] = {"weight1", "weight2", "weight_scales1",    "weight_scales2",
                                        "bias1",   "bias2",   "transpose_weight1", "transpose_weight2"};
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : "";
        int found = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) found |= k && !strcmp(k, known[i]);
        if (!found) {
            mm_py_invalid("%s weights: unknown entry %R", group, key);
            return -1;
        }
    }
    if (weight_entry(dict, group, "weight1", 0, &out->w1) < 0 ||
        weight_entry(dict, group, "weight2", 0, &out->w2) < 0 ||
        weight_entry(dict, group, "weight_scales1", 1, &out->s1) < 0 ||
        weight_entry(dict, group, "weight_scales2", 1, &out->s2) < 0 ||
        weight_entry(dict, group, "bias1", 1, &out->b1) < 0 ||
        weight_entry(dict, group, "bias2", 1, &out->b2) < 0) {
        mm_py_expert_weights_release(out);
        return -1;
    }
    if (out->w1.t.ndim < 1) {
        mm_py_expert_weights_release(out);
        mm_py_invalid("%s weight1 must be stacked (count, ...)", group);
        return -1;
    }
    mm_mega_moe_expert_weights *w = &out->w;
    w->count = out->w1.t.shape[0];
    w->weight1 = &out->w1.t;
    w->weight2 = &out->w2.t;
    w->weight_scales1 = out->s1.present ? &out->s1.t : NULL;
    w->weight_scales2 = out->s2.present ? &out->s2.t : NULL;
    w->bias1 = out->b1.present ? &out->b1.t : NULL;
    w->bias2 = out->b2.present ? &out->b2.t : NULL;
    PyObject *t1 = PyDict_GetItemString(dict, "transpose_weight1");
    PyObject *t2 = PyDict_GetItemString(dict, "transpose_weight2");
    w->transpose_weight1 = t1 ? PyObject_IsTrue(t1) : 0;
    w->transpose_weight2 = t2 ? PyObject_IsTrue(t2) : 0;
    return 0;
}

void mm_py_expert_weights_release(mm_py_expert_weights *w) {
    mm_py_tensor *all[] = {&w->w1, &w->w2, &w->s1, &w->s2, &w->b1, &w->b2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mm_py_tensor_release(all[i]);
}
