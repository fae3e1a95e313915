/* SPDX-License-Identifier: Apache-2.0 */
/* python/ext/py_mega_moe.c: MegaMoE with one rank per process over an MPI communicator the caller owns
 * (mpi4py: the address of its MPI_Comm handle, MPI._addressof(comm), goes to mm_comm_from_mpi_ptr), and
 * the packed-weights object that this and the world binding share.
 *
 *   MegaMoE(mpi_comm_address, sizing)   collective: wraps the communicator, creates the buffer
 *   .weights(routed, shared) -> Weights local: checks and packs this rank's experts
 *   .run(weights, attrs, call_specs)    collective: one call (y and expert_token_nums written in place)
 *   .close()                            collective: frees the buffer and the communicator
 *
 * The GIL is released during the collective calls, so other Python threads run meanwhile. */
#include "py_common.h"

#include <string.h>

#include "megamoe/comm.h"

/* ---- Weights --------------------------------------------------------------------------------- */

typedef struct py_weights {
    PyObject_HEAD mm_mega_moe_weights *w;
    PyObject *owner;
    int busy;
} py_weights;

static PyTypeObject weights_type;

PyObject *mm_py_weights_new(mm_mega_moe_weights *w, PyObject *owner) {
    py_weights *o = PyObject_New(py_weights, &weights_type);
    if (!o) {
        mm_mega_moe_weights_free(w);
        return NULL;
    }
    o->w = w;
    o->owner = Py_NewRef(owner);
    o->busy = 0;
    return (PyObject *)o;
}

mm_mega_moe_weights *mm_py_weights_get(PyObject *obj) {
    if (!PyObject_TypeCheck(obj, &weights_type)) {
        mm_py_invalid("weights: expected a megamoe Weights object, got a %s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    py_weights *o = (py_weights *)obj;
    if (!o->w) mm_py_invalid("weights: this Weights object is closed");
    return o->w;
}

void mm_py_weights_hold(PyObject *obj, int delta) {
    ((py_weights *)obj)->busy += delta;
}

PyObject *mm_py_weights_pack(mm_mega_moe_buffer *buffer, PyObject *routed_obj, PyObject *shared_obj,
                             const char *routed_label, const char *shared_label, const char *what,
                             PyObject *owner) {
    mm_py_expert_weights routed, shared;
    if (mm_py_expert_weights_parse(routed_obj, routed_label, &routed) < 0) return NULL;
    if (mm_py_expert_weights_parse(shared_obj, shared_label, &shared) < 0) {
        mm_py_expert_weights_release(&routed);
        return NULL;
    }
    mm_error err = {0};
    mm_mega_moe_weights *w = NULL;
    mm_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = mm_mega_moe_weights_create(buffer, &routed.w, shared.w.count ? &shared.w : NULL, &w, &err);
    Py_END_ALLOW_THREADS;
    mm_py_expert_weights_release(&routed);
    mm_py_expert_weights_release(&shared);
    if (st != MM_OK) return mm_py_raise(&err, what);
    return mm_py_weights_new(w, owner);
}

static PyObject *weights_close(PyObject *self, PyObject *unused) {
    (void)unused;
    py_weights *o = (py_weights *)self;
    if (o->busy) return mm_py_invalid("Weights.close(): a call using these weights is running");
    mm_mega_moe_weights_free(o->w);
    o->w = NULL;
    Py_CLEAR(o->owner);
    Py_RETURN_NONE;
}

static void weights_dealloc(PyObject *self) {
    py_weights *o = (py_weights *)self;
    mm_mega_moe_weights_free(o->w);
    Py_XDECREF(o->owner);
    PyObject_Free(self);
}

static PyObject *weights_closed(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(((py_weights *)self)->w == NULL);
}

static PyMethodDef weights_methods[] = {
    MM_PY_CLOSE_METHODS(weights_close, "Frees the packed weights (idempotent)."),
};
static PyGetSetDef weights_getset[] = {{"closed", weights_closed, NULL, "True after close().", NULL},
                                       {NULL, NULL, NULL, NULL, NULL}};

/* ---- sizing and call tensors ----------------------------------------------------------------- */

int mm_py_sizing_parse(PyObject *dict, mm_mega_moe_sizing *s) {
    memset(s, 0, sizeof *s);
    if (!PyDict_Check(dict)) {
        mm_py_invalid("sizing must be a dict");
        return -1;
    }
    struct {
        const char *key;
        int64_t *field;
        int required;
    } fields[] = {{"moe_expert_num", &s->moe_expert_num, 1},
                  {"num_max_tokens_per_rank", &s->num_max_tokens_per_rank, 1},
                  {"topk", &s->topk, 1},
                  {"hidden", &s->hidden, 1},
                  {"intermediate_hidden", &s->intermediate_hidden, 1},
                  {"max_recv_token_num", &s->max_recv_token_num, 0}};
    Py_ssize_t used = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        PyObject *v = PyDict_GetItemString(dict, fields[i].key);
        if (!v) {
            if (!fields[i].required) continue;
            mm_py_invalid("sizing: '%s' is required", fields[i].key);
            return -1;
        }
        used++;
        long long x = PyLong_AsLongLong(v);
        if (x == -1 && PyErr_Occurred()) return -1;
        *fields[i].field = x;
    }
    if (used != PyDict_Size(dict)) {
        mm_py_invalid("sizing: unknown keys (known: moe_expert_num, num_max_tokens_per_rank, topk, hidden, "
                      "intermediate_hidden, max_recv_token_num)");
        return -1;
    }
    return 0;
}

int mm_py_call_parse(PyObject *specs, const char *rank_label, mm_py_call *c) {
    memset(c, 0, sizeof *c);
    if (!PyTuple_Check(specs) || PyTuple_GET_SIZE(specs) != MM_PY_CALL_TENSORS) {
        mm_py_invalid("%s: expected %d tensor specs", rank_label, MM_PY_CALL_TENSORS);
        return -1;
    }
    static const char *const names[MM_PY_CALL_TENSORS] = {
        "x", "scales", "topk_ids", "topk_weights", "x_active_mask", "y", "expert_token_nums"};
    static const int optional[MM_PY_CALL_TENSORS] = {0, 1, 0, 0, 1, 0, 0};
    static const int writable[MM_PY_CALL_TENSORS] = {0, 0, 0, 0, 0, 1, 1};
    char labels[MM_PY_CALL_TENSORS][96];
    const char *label_ptrs[MM_PY_CALL_TENSORS];
    for (int i = 0; i < MM_PY_CALL_TENSORS; i++) {
        snprintf(labels[i], sizeof labels[i], "%s%s%s", rank_label, *rank_label ? " " : "", names[i]);
        label_ptrs[i] = labels[i];
    }
    if (mm_py_tensors_parse(&PyTuple_GET_ITEM(specs, 0), label_ptrs, writable, optional, MM_PY_CALL_TENSORS,
                            c->t) < 0)
        return -1;
    mm_py_tensor *t = c->t;
    c->in = (mm_mega_moe_inputs){.x = &t[0].t,
                                 .scales = t[1].present ? &t[1].t : NULL,
                                 .topk_ids = &t[2].t,
                                 .topk_weights = &t[3].t,
                                 .x_active_mask = t[4].present ? &t[4].t : NULL};
    c->out = (mm_mega_moe_outputs){.y = &t[5].t, .expert_token_nums = &t[6].t};
    return 0;
}

void mm_py_call_release(mm_py_call *c) {
    for (int i = 0; i < MM_PY_CALL_TENSORS; i++) mm_py_tensor_release(&c->t[i]);
}

/* ---- MegaMoE over MPI ------------------------------------------------------------------------ */

typedef struct py_mega_moe {
    PyObject_HEAD mm_comm *comm;
    mm_mega_moe_buffer *buffer;
    int busy;
} py_mega_moe;
static PyTypeObject mega_moe_type;

static int mega_moe_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"mpi_comm_address", "sizing", NULL};
    py_mega_moe *o = (py_mega_moe *)self;
    unsigned long long address;
    PyObject *sizing_obj;
    mm_mega_moe_sizing sizing;
    if (o->comm) {
        mm_py_invalid("MegaMoE.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KO", kwlist, &address, &sizing_obj) ||
        mm_py_sizing_parse(sizing_obj, &sizing) < 0)
        return -1;
    if (!address) {
        mm_py_invalid("mpi_comm_address is 0 (pass MPI._addressof(comm) of an mpi4py communicator)");
        return -1;
    }
    mm_error err = {0};
    mm_status st;
    mm_comm *comm = NULL;
    mm_mega_moe_buffer *buffer = NULL;
    Py_BEGIN_ALLOW_THREADS;
    st = mm_comm_from_mpi_ptr((const void *)(uintptr_t)address, &comm, &err);
    if (st == MM_OK) st = mm_mega_moe_buffer_create(comm, &sizing, &buffer, &err);
    if (st != MM_OK && comm) {
        mm_error ignored;
        mm_comm_free(comm, &ignored);
        comm = NULL;
    }
    Py_END_ALLOW_THREADS;
    if (st != MM_OK) {
        mm_py_raise(&err, NULL);
        return -1;
    }
    o->comm = comm;
    o->buffer = buffer;
    return 0;
}

static int mega_moe_open(py_mega_moe *o) {
    if (!o->buffer) mm_py_invalid("this MegaMoE object is closed");
    return o->buffer != NULL;
}

static PyObject *mega_moe_weights(PyObject *self, PyObject *args) {
    py_mega_moe *o = (py_mega_moe *)self;
    PyObject *routed_obj, *shared_obj = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &routed_obj, &shared_obj) || !mega_moe_open(o)) return NULL;
    return mm_py_weights_pack(o->buffer, routed_obj, shared_obj, "routed", "shared", NULL, self);
}

static PyObject *mega_moe_run(PyObject *self, PyObject *args) {
    py_mega_moe *o = (py_mega_moe *)self;
    PyObject *weights_obj, *attrs_obj, *specs;
    if (!PyArg_ParseTuple(args, "OOO", &weights_obj, &attrs_obj, &specs) || !mega_moe_open(o)) return NULL;
    mm_mega_moe_weights *w = mm_py_weights_get(weights_obj);
    mm_mega_moe_attrs attrs;
    mm_py_call call;
    if (!w || mm_py_attrs_parse(attrs_obj, &attrs) < 0 || mm_py_call_parse(specs, "", &call) < 0) return NULL;
    mm_error err = {0};
    mm_status st;
    o->busy++;
    mm_py_weights_hold(weights_obj, 1);
    Py_BEGIN_ALLOW_THREADS;
    st = mm_mega_moe_run(o->buffer, w, &attrs, &call.in, &call.out, &err);
    Py_END_ALLOW_THREADS;
    mm_py_weights_hold(weights_obj, -1);
    o->busy--;
    mm_py_call_release(&call);
    if (st != MM_OK) return mm_py_raise(&err, NULL);
    Py_RETURN_NONE;
}

static PyObject *mega_moe_close(PyObject *self, PyObject *unused) {
    (void)unused;
    py_mega_moe *o = (py_mega_moe *)self;
    if (o->busy) return mm_py_invalid("MegaMoE.close(): a call is running");
    mm_error err = {0};
    mm_status st = MM_OK;
    if (o->buffer || o->comm) {
        mm_mega_moe_buffer *buffer = o->buffer;
        mm_comm *comm = o->comm;
        o->buffer = NULL;
        o->comm = NULL;
        Py_BEGIN_ALLOW_THREADS;
        st = mm_mega_moe_buffer_free(buffer, &err);
        mm_error err2 = {0};
        mm_status st2 = mm_comm_free(comm, &err2);
        if (st == MM_OK && st2 != MM_OK) {
            st = st2;
            err = err2;
        }
        Py_END_ALLOW_THREADS;
    }
    if (st != MM_OK) return mm_py_raise(&err, "MegaMoE.close");
    Py_RETURN_NONE;
}

static void mega_moe_dealloc(PyObject *self) {
    /* Freeing is collective: a forgotten close() cannot be done here (the other ranks may not be
     * freeing at the same time), so the memory is left to the process's end. */
    PyObject_Free(self);
}

static PyObject *mega_moe_rank(PyObject *self, void *unused) {
    (void)unused;
    py_mega_moe *o = (py_mega_moe *)self;
    if (!mega_moe_open(o)) return NULL;
    return Py_BuildValue("(ii)", mm_comm_rank(o->comm), mm_comm_size(o->comm));
}

static PyMethodDef mega_moe_methods[] = {
    {"weights", mega_moe_weights, METH_VARARGS, "weights(routed, shared=None) -> Weights (local)."},
    {"run", mega_moe_run, METH_VARARGS, "run(weights, attrs, specs): one collective call."},
    MM_PY_CLOSE_METHODS(mega_moe_close, "Collective: frees the buffer and the communicator."),
};
static PyGetSetDef mega_moe_getset[] = {{"rank_and_size", mega_moe_rank, NULL, "(rank, size).", NULL},
                                        {NULL, NULL, NULL, NULL, NULL}};

static PyObject *py_mpi_available(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(mm_comm_mpi_available());
}

static PyMethodDef methods[] = {
    {"mpi_available", py_mpi_available, METH_NOARGS, "True when this build has the MPI backend."},
    {NULL, NULL, 0, NULL},
};

int mm_py_init_mega_moe(PyObject *module) {
    if (mm_py_add_class(module, &weights_type, "megamoe._megamoe.Weights",
                        "One rank's packed MegaMoE expert weights (from MegaMoE.weights or World.weights).",
                        sizeof(py_weights), 0, NULL, weights_dealloc, weights_methods, weights_getset) < 0 ||
        mm_py_add_class(module, &mega_moe_type, "megamoe._megamoe.MegaMoE",
                        "MegaMoE, one rank per MPI process (use megamoe.MegaMoE).", sizeof(py_mega_moe), 0,
                        mega_moe_init, mega_moe_dealloc, mega_moe_methods, mega_moe_getset) < 0)
        return -1;
    return PyModule_AddFunctions(module, methods);
}
