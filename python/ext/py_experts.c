/* SPDX-License-Identifier: Apache-2.0 */
/* python/ext/py_experts.c: the local experts call (megamoe/experts.h) as megamoe._megamoe.Experts.
 *
 *   Experts(config, routed, shared=None)   packs the weights once (config: num_experts, hidden,
 *                                          intermediate_hidden, expert_map (i32 spec or None), activation)
 *   .run(attrs, x, topk_ids, topk_weights, x_active_mask, flags, y)   one call, y written in place
 *
 * mm_experts_run is thread-safe on one mm_experts, and the GIL is released during it, so several Python
 * threads may call the same Experts at once; close() refuses while a call runs. */
#include "py_common.h"

#include <string.h>

#include "megamoe/experts.h"

typedef struct py_experts {
    PyObject_HEAD mm_experts *e;
    int busy;
} py_experts;
static PyTypeObject experts_type;

static int dict_int(PyObject *dict, const char *key, int64_t *out) {
    PyObject *v = PyDict_GetItemString(dict, key);
    if (!v) {
        mm_py_invalid("config: '%s' is required", key);
        return -1;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

static int experts_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"config", "routed", "shared", NULL};
    py_experts *o = (py_experts *)self;
    PyObject *config, *routed_obj, *shared_obj = Py_None;
    if (o->e) {
        mm_py_invalid("Experts.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O|O", kwlist, &PyDict_Type, &config, &routed_obj,
                                     &shared_obj))
        return -1;
    mm_experts_config cfg = {0};
    if (dict_int(config, "num_experts", &cfg.num_experts) < 0 ||
        dict_int(config, "hidden", &cfg.hidden) < 0 ||
        dict_int(config, "intermediate_hidden", &cfg.intermediate_hidden) < 0)
        return -1;
    PyObject *act = PyDict_GetItemString(config, "activation");
    if (act && act != Py_None) {
        const char *s = PyUnicode_Check(act) ? PyUnicode_AsUTF8(act) : NULL;
        int a = s ? mm_mega_moe_activation_from_name(s) : -1;
        if (a < 0) {
            mm_py_invalid("config: unknown activation %R", act);
            return -1;
        }
        cfg.activation = (mm_mega_moe_activation)a;
    }
    mm_py_tensor map;
    if (mm_py_tensor_parse(PyDict_GetItemString(config, "expert_map"), "expert_map", 0, 1, &map) < 0)
        return -1;
    if (map.present) {
        if (map.t.dtype != MM_DTYPE_I32 || map.t.ndim != 1 || map.t.shape[0] != cfg.num_experts) {
            mm_py_tensor_release(&map);
            mm_py_invalid("expert_map must be i32 of shape (num_experts,) = (%lld,)",
                          (long long)cfg.num_experts);
            return -1;
        }
        cfg.expert_map = (const int32_t *)map.t.data;
    }
    mm_py_expert_weights routed, shared;
    if (mm_py_expert_weights_parse(routed_obj, "routed", &routed) < 0) {
        mm_py_tensor_release(&map);
        return -1;
    }
    if (mm_py_expert_weights_parse(shared_obj, "shared", &shared) < 0) {
        mm_py_expert_weights_release(&routed);
        mm_py_tensor_release(&map);
        return -1;
    }
    mm_error err = {0};
    mm_status st;
    mm_experts *e = NULL;
    Py_BEGIN_ALLOW_THREADS;
    st = mm_experts_create(&cfg, &routed.w, shared.w.count ? &shared.w : NULL, &e, &err);
    Py_END_ALLOW_THREADS;
    mm_py_expert_weights_release(&routed);
    mm_py_expert_weights_release(&shared);
    mm_py_tensor_release(&map);
    if (st != MM_OK) {
        mm_py_raise(&err, NULL);
        return -1;
    }
    o->e = e;
    return 0;
}

/* run(attrs, x, topk_ids, topk_weights, x_active_mask, flags, y) */
static PyObject *experts_run(PyObject *self, PyObject *args) {
    py_experts *o = (py_experts *)self;
    PyObject *attrs_obj, *xs, *is, *ws, *ms, *ys;
    int flags;
    if (!PyArg_ParseTuple(args, "OOOOOiO", &attrs_obj, &xs, &is, &ws, &ms, &flags, &ys)) return NULL;
    if (!o->e) return mm_py_invalid("this Experts object is closed");
    mm_mega_moe_attrs attrs;
    if (mm_py_attrs_parse(attrs_obj, &attrs) < 0) return NULL;
    mm_py_tensor t[5];
    PyObject *specs[5] = {xs, is, ws, ms, ys};
    static const char *const names[5] = {"x", "topk_ids", "topk_weights", "x_active_mask", "y"};
    static const int writable[5] = {0, 0, 0, 0, 1}, optional[5] = {0, 0, 0, 1, 0};
    if (mm_py_tensors_parse(specs, names, writable, optional, 5, t) < 0) return NULL;
    mm_experts_inputs in = {.x = &t[0].t,
                            .topk_ids = &t[1].t,
                            .topk_weights = &t[2].t,
                            .x_active_mask = t[3].present ? &t[3].t : NULL,
                            .flags = flags};
    mm_error err = {0};
    mm_status st;
    o->busy++;
    Py_BEGIN_ALLOW_THREADS;
    st = mm_experts_run(o->e, &attrs, &in, &t[4].t, &err);
    Py_END_ALLOW_THREADS;
    o->busy--;
    if (st != MM_OK) mm_py_raise(&err, NULL);
    return mm_py_tensors_finish(t, 5);
}

static PyObject *experts_close(PyObject *self, PyObject *unused) {
    (void)unused;
    py_experts *o = (py_experts *)self;
    if (o->busy) return mm_py_invalid("Experts.close(): a call is running");
    mm_experts_free(o->e);
    o->e = NULL;
    Py_RETURN_NONE;
}

static void experts_dealloc(PyObject *self) {
    mm_experts_free(((py_experts *)self)->e);
    PyObject_Free(self);
}

static PyObject *experts_bytes(PyObject *self, void *unused) {
    (void)unused;
    py_experts *o = (py_experts *)self;
    if (!o->e) return mm_py_invalid("this Experts object is closed");
    return PyLong_FromSize_t(mm_experts_bytes(o->e));
}

static PyObject *experts_closed(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(((py_experts *)self)->e == NULL);
}

static PyMethodDef experts_methods[] = {
    {"run", experts_run, METH_VARARGS, "run(attrs, x, topk_ids, topk_weights, x_active_mask, flags, y)."},
    MM_PY_CLOSE_METHODS(experts_close, "Frees the packed weights (idempotent)."),
};
static PyGetSetDef experts_getset[] = {{"nbytes", experts_bytes, NULL, "Bytes of the packed weights.", NULL},
                                       {"closed", experts_closed, NULL, "True after close().", NULL},
                                       {NULL, NULL, NULL, NULL, NULL}};

int mm_py_init_experts(PyObject *module) {
    return mm_py_add_class(module, &experts_type, "megamoe._megamoe.Experts",
                           "The local experts call (use megamoe.Experts).", sizeof(py_experts), 1,
                           experts_init, experts_dealloc, experts_methods, experts_getset);
}
