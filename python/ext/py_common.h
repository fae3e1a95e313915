/* SPDX-License-Identifier: Apache-2.0 */
/* python/ext/py_common.h: what the files of the CPython extension `megamoe._megamoe` share: the
 * exceptions (one per mm_status), the tensor arguments (a buffer + a megamoe dtype name + a logical
 * shape, checked against each other so a wrong dtype, shape or layout is an exception, never a crash),
 * the parsing of MegaMoE attributes and expert weights, and each file's registration function.
 *
 * The extension uses only the public API (include/megamoe/) and the buffer protocol: it needs no numpy
 * headers. The pure-Python layer (python/megamoe/__init__.py) allocates arrays and passes them in. */
#ifndef MEGAMOE_PY_COMMON_H
#define MEGAMOE_PY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "megamoe/dtype.h"
#include "megamoe/mega_moe.h"
#include "megamoe/status.h"

/* Sets the Python exception of err->status with err's message (prefixed by `what` when not NULL);
 * returns NULL so callers can `return mm_py_raise(...)`. */
PyObject *mm_py_raise(const mm_error *err, const char *what);
/* Raises megamoe.InvalidArgumentError with a formatted message; returns NULL. */
PyObject *mm_py_invalid(const char *fmt, ...);

/* A tensor argument: the Python side passes (buffer, dtype_name, shape). The buffer must be
 * C-contiguous, have exactly mm_tensor_nbytes bytes and an item size (and kind) that fits the dtype. */
typedef struct mm_py_tensor {
    Py_buffer view;
    int held;    /* view is held and must be released */
    int present; /* the argument was not None */
    mm_tensor t;
} mm_py_tensor;

/* Parses spec (a (buffer, dtype, shape) tuple, or None when optional) into out; name is used in
 * messages. Returns 0 on success, -1 with a Python exception set. */
int mm_py_tensor_parse(PyObject *spec, const char *name, int writable, int optional, mm_py_tensor *out);
void mm_py_tensor_release(mm_py_tensor *t);
/* Parses n specs (writable[i], optional[i]) into out[0..n); on failure releases those parsed and
 * returns -1. mm_py_tensors_finish releases n tensors and returns None, or NULL when an exception is set. */
int mm_py_tensors_parse(PyObject *const *specs, const char *const *names, const int *writable,
                        const int *optional, int n, mm_py_tensor *out);
PyObject *mm_py_tensors_finish(mm_py_tensor *t, int n);
/* __enter__ (returns self) and __exit__ (calls self.close()) of every object with a close(). */
PyObject *mm_py_enter(PyObject *self, PyObject *unused);
PyObject *mm_py_exit(PyObject *self, PyObject *args);
/* The end of the method table of every object with a close(): close, __enter__ (returns self),
 * __exit__ (calls close()) and the sentinel, so `with obj:` closes it. */
#define MM_PY_CLOSE_METHODS(close_fn, close_doc)                                                             \
    {"close", close_fn, METH_NOARGS, close_doc}, {"__enter__", mm_py_enter, METH_NOARGS, NULL},              \
        {"__exit__", mm_py_exit, METH_VARARGS, NULL}, {                                                      \
        NULL, NULL, 0, NULL                                                                                  \
    }

/* Fills the static type object *type of class `name` ("megamoe._megamoe.<Name>"; the module attribute
 * is <Name>), readies it and adds it to module. subclassable: the Python layer derives from it; init
 * NULL: made by the extension only, not constructible from Python. Returns 0 or -1. */
int mm_py_add_class(PyObject *module, PyTypeObject *type, const char *name, const char *doc, Py_ssize_t size,
                    int subclassable, initproc init, destructor dealloc, PyMethodDef *methods,
                    PyGetSetDef *getset);

/* A dtype name -> mm_dtype, or -1 with InvalidArgumentError naming `name`. */
int mm_py_dtype(PyObject *name_obj, const char *name, mm_dtype *out);

/* MegaMoE attributes from a dict (keys as the C struct's fields; dtypes and the activation by name).
 * Unknown keys are errors. */
int mm_py_attrs_parse(PyObject *dict, mm_mega_moe_attrs *out);

/* One group of expert weights from a dict {"weight1": spec, "weight2": spec, "weight_scales1": spec,
 * ..., "transpose_weight1": bool, ...} (stacked form). count is taken from weight1's leading dim. */
typedef struct mm_py_expert_weights {
    mm_py_tensor w1, w2, s1, s2, b1, b2;
    mm_mega_moe_expert_weights w;
} mm_py_expert_weights;
/* dict may be None (no group: w.count = 0 and every pointer NULL). Returns 0 or -1. */
int mm_py_expert_weights_parse(PyObject *dict, const char *group, mm_py_expert_weights *out);
void mm_py_expert_weights_release(mm_py_expert_weights *w);

/* MegaMoE sizing from a dict with the fields of mm_mega_moe_sizing (max_recv_token_num optional). */
int mm_py_sizing_parse(PyObject *dict, mm_mega_moe_sizing *out);

/* One rank's tensors of a MegaMoE call: x, scales (optional), topk_ids, topk_weights, x_active_mask
 * (optional), y and expert_token_nums (writable). */
enum { MM_PY_CALL_TENSORS = 7 };
typedef struct mm_py_call {
    mm_py_tensor t[MM_PY_CALL_TENSORS]; /* in the order above */
    mm_mega_moe_inputs in;
    mm_mega_moe_outputs out;
} mm_py_call;
/* specs is a tuple of the 7 specs in that order. */
int mm_py_call_parse(PyObject *specs, const char *rank_label, mm_py_call *c);
void mm_py_call_release(mm_py_call *c);

/* The packed weights of one rank (megamoe._megamoe.Weights): owner is the object whose buffer they were
 * checked against (kept alive). mm_py_weights_get fails (exception) for another type or a closed one. */
PyObject *mm_py_weights_new(mm_mega_moe_weights *w, PyObject *owner);
mm_mega_moe_weights *mm_py_weights_get(PyObject *obj);
/* Parses the routed and shared (None: none) expert weights, named by their labels in messages, packs
 * them for buffer with the GIL released and returns the Weights object (owner kept alive); a failure
 * of the packing is raised with prefix `what` (NULL: none). */
PyObject *mm_py_weights_pack(mm_mega_moe_buffer *buffer, PyObject *routed_obj, PyObject *shared_obj,
                             const char *routed_label, const char *shared_label, const char *what,
                             PyObject *owner);
/* Marks the objects as used by a running call (close() then refuses) or no longer. */
void mm_py_weights_hold(PyObject *obj, int delta);

/* Registration of each file's functions and types into the module; return 0 or -1. */
int mm_py_init_errors(PyObject *module);
int mm_py_init_formats(PyObject *module);
int mm_py_init_safetensors(PyObject *module);
int mm_py_init_mega_moe(PyObject *module);
int mm_py_init_experts(PyObject *module);
int mm_py_init_world(PyObject *module);

#endif
