/* SPDX-License-Identifier: Apache-2.0 */
/* python/ext/py_world.c: a persistent world of rank threads (megamoe/world.h) driving MegaMoE from the
 * calling thread, every rank's tensors given as lists.
 *
 *   World(nranks)                       starts the rank threads (parked between calls)
 *   .create_buffers(sizing)             one MegaMoE buffer per rank (collective on the world)
 *   .weights(rank, routed, shared)      -> Weights of that rank (local)
 *   .run(weights_list, attrs, specs_list)   one MegaMoE call on every rank
 *   .close()                            frees the buffers, then the world
 *
 * The GIL is released during the calls; one call at a time (the world is not reentrant). */
#include "py_common.h"

#include <stdio.h>
#include <string.h>

#include "megamoe/world.h"

typedef struct py_world {
    PyObject_HEAD mm_world *world;
    mm_mega_moe_buffer *buffers[MM_COMM_MAX_RANKS];
    int nranks, has_buffers, busy;
} py_world;
static PyTypeObject world_type;

static int world_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"nranks", NULL};
    py_world *o = (py_world *)self;
    int nranks;
    if (o->world) {
        mm_py_invalid("World.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i", kwlist, &nranks)) return -1;
    mm_error err = {0};
    mm_status st;
    mm_world *w = NULL;
    Py_BEGIN_ALLOW_THREADS;
    st = mm_world_create(nranks, MM_WORLD_DEFAULT, &w, &err);
    Py_END_ALLOW_THREADS;
    if (st != MM_OK) {
        mm_py_raise(&err, NULL);
        return -1;
    }
    o->world = w;
    o->nranks = mm_world_size(w);
    return 0;
}

static int world_open(py_world *o, int need_buffers) {
    if (!o->world)
        mm_py_invalid("this World object is closed");
    else if (o->busy)
        mm_py_invalid("the World is busy with another call (one call at a time)");
    else if (need_buffers && !o->has_buffers)
        mm_py_invalid("the World has no MegaMoE buffers (call create_buffers first)");
    else
        return 1;
    return 0;
}

static PyObject *world_create_buffers(PyObject *self, PyObject *sizing_obj) {
    py_world *o = (py_world *)self;
    mm_mega_moe_sizing sizing;
    if (!world_open(o, 0) || mm_py_sizing_parse(sizing_obj, &sizing) < 0) return NULL;
    if (o->has_buffers) return mm_py_invalid("the World already has MegaMoE buffers");
    mm_error err = {0};
    mm_status st;
    o->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    st = mm_mega_moe_world_buffers_create(o->world, &sizing, o->buffers, &err);
    Py_END_ALLOW_THREADS;
    o->busy = 0;
    if (st != MM_OK) return mm_py_raise(&err, NULL);
    o->has_buffers = 1;
    Py_RETURN_NONE;
}

static PyObject *world_weights(PyObject *self, PyObject *args) {
    py_world *o = (py_world *)self;
    int rank;
    PyObject *routed_obj, *shared_obj = Py_None;
    if (!PyArg_ParseTuple(args, "iO|O", &rank, &routed_obj, &shared_obj) || !world_open(o, 1)) return NULL;
    if (rank < 0 || rank >= o->nranks) return mm_py_invalid("rank %d is outside [0, %d)", rank, o->nranks);
    char routed_label[32], shared_label[32];
    snprintf(routed_label, sizeof routed_label, "rank %d routed", rank);
    snprintf(shared_label, sizeof shared_label, "rank %d shared", rank);
    return mm_py_weights_pack(o->buffers[rank], routed_obj, shared_obj, routed_label, shared_label,
                              shared_label, self);
}

/* run(weights_list, attrs, specs_list): lists of nranks entries. */
static PyObject *world_run(PyObject *self, PyObject *args) {
    py_world *o = (py_world *)self;
    PyObject *wl, *attrs_obj, *sl;
    if (!PyArg_ParseTuple(args, "O!OO!", &PyList_Type, &wl, &attrs_obj, &PyList_Type, &sl) ||
        !world_open(o, 1))
        return NULL;
    int R = o->nranks;
    if (PyList_GET_SIZE(wl) != R || PyList_GET_SIZE(sl) != R)
        return mm_py_invalid("weights and tensors must be lists of %d entries (one per rank)", R);
    mm_mega_moe_attrs attrs;
    if (mm_py_attrs_parse(attrs_obj, &attrs) < 0) return NULL;
    const mm_mega_moe_weights *weights[MM_COMM_MAX_RANKS];
    mm_mega_moe_inputs in[MM_COMM_MAX_RANKS];
    mm_mega_moe_outputs out[MM_COMM_MAX_RANKS];
    mm_py_call *calls = PyMem_Calloc((size_t)R, sizeof *calls);
    if (!calls) return PyErr_NoMemory();
    int parsed = 0;
    PyObject *result = NULL;
    for (; parsed < R; parsed++) {
        char label[32];
        snprintf(label, sizeof label, "rank %d", parsed);
        weights[parsed] = mm_py_weights_get(PyList_GET_ITEM(wl, parsed));
        if (!weights[parsed] || mm_py_call_parse(PyList_GET_ITEM(sl, parsed), label, &calls[parsed]) < 0)
            break;
        in[parsed] = calls[parsed].in;
        out[parsed] = calls[parsed].out;
    }
    if (parsed == R) {
        mm_error err = {0};
        mm_status st;
        o->busy = 1;
        for (int r = 0; r < R; r++) mm_py_weights_hold(PyList_GET_ITEM(wl, r), 1);
        Py_BEGIN_ALLOW_THREADS;
        st = mm_mega_moe_world_run(o->world, o->buffers, weights, &attrs, in, out, &err);
        Py_END_ALLOW_THREADS;
        for (int r = 0; r < R; r++) mm_py_weights_hold(PyList_GET_ITEM(wl, r), -1);
        o->busy = 0;
        result = st == MM_OK ? Py_NewRef(Py_None) : mm_py_raise(&err, NULL);
    }
    for (int r = 0; r < parsed; r++) mm_py_call_release(&calls[r]);
    PyMem_Free(calls);
    return result;
}

static mm_status world_free_all(py_world *o, mm_error *err) {
    mm_status st = MM_OK;
    if (o->has_buffers) st = mm_mega_moe_world_buffers_free(o->world, o->buffers, err);
    o->has_buffers = 0;
    mm_error err2 = {0};
    mm_status st2 = mm_world_free(o->world, &err2);
    o->world = NULL;
    if (st == MM_OK && st2 != MM_OK) {
        *err = err2;
        st = st2;
    }
    return st;
}

static PyObject *world_close(PyObject *self, PyObject *unused) {
    (void)unused;
    py_world *o = (py_world *)self;
    if (!o->world) Py_RETURN_NONE;
    if (o->busy) return mm_py_invalid("World.close(): a call is running");
    mm_error err = {0};
    mm_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = world_free_all(o, &err);
    Py_END_ALLOW_THREADS;
    if (st != MM_OK) return mm_py_raise(&err, "World.close");
    Py_RETURN_NONE;
}

static void world_dealloc(PyObject *self) {
    py_world *o = (py_world *)self;
    if (o->world && !o->busy) { /* the rank threads belong to this process: freeing here is safe */
        mm_error ignored;
        world_free_all(o, &ignored);
    }
    PyObject_Free(self);
}

static PyObject *world_size(PyObject *self, void *unused) {
    (void)unused;
    return PyLong_FromLong(((py_world *)self)->nranks);
}

static PyMethodDef world_methods[] = {
    {"create_buffers", world_create_buffers, METH_O, "create_buffers(sizing): one MegaMoE buffer per rank."},
    {"weights", world_weights, METH_VARARGS, "weights(rank, routed, shared=None) -> Weights."},
    {"run", world_run, METH_VARARGS, "run(weights_list, attrs, specs_list): one MegaMoE call on every rank."},
    MM_PY_CLOSE_METHODS(world_close, "Frees the buffers and the world (idempotent)."),
};
static PyGetSetDef world_getset[] = {{"nranks", world_size, NULL, "Ranks of the world.", NULL},
                                     {NULL, NULL, NULL, NULL, NULL}};

int mm_py_init_world(PyObject *module) {
    return mm_py_add_class(module, &world_type, "megamoe._megamoe.World",
                           "A persistent world of rank threads (use megamoe.World).", sizeof(py_world), 1,
                           world_init, world_dealloc, world_methods, world_getset);
}
