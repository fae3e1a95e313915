/* SPDX-License-Identifier: Apache-2.0 */
/* python/ext/py_safetensors.c: safetensors files (megamoe/safetensors.h) and case files (megamoe/case.h).
 *
 * st_read returns every tensor (or the named ones) as (name, dtype_name, logical_shape, bytearray) plus
 * the metadata; the Python layer views the bytes as numpy arrays without copying. st_write takes
 * (name, tensor spec) pairs and metadata. case_run runs a case file as `megamoe case` does. File reads
 * and writes and the case run release the GIL. */
#include "py_common.h"

#include <string.h>

#include "megamoe/case.h"
#include "megamoe/safetensors.h"

static PyObject *shape_tuple(int ndim, const int64_t *shape) {
    PyObject *t = PyTuple_New(ndim);
    for (int i = 0; t && i < ndim; i++) {
        PyObject *v = PyLong_FromLongLong(shape[i]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* One tensor as (name, dtype, shape, bytearray). */
static PyObject *read_one(mm_st_reader *reader, const mm_st_tensor_info *info) {
    PyObject *data = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)info->nbytes);
    if (!data) return NULL;
    mm_error err = {0};
    mm_status st;
    void *dst = PyByteArray_AS_STRING(data);
    Py_BEGIN_ALLOW_THREADS;
    st = mm_st_read(reader, info, dst, &err);
    Py_END_ALLOW_THREADS;
    if (st != MM_OK) {
        Py_DECREF(data);
        return mm_py_raise(&err, NULL);
    }
    PyObject *shape = shape_tuple(info->ndim, info->shape);
    if (!shape) {
        Py_DECREF(data);
        return NULL;
    }
    return Py_BuildValue("(ssNN)", info->name, mm_dtype_name(info->dtype), shape, data);
}

/* st_read(path, names=None) -> ([(name, dtype, shape, bytearray), ...], {metadata}) */
static PyObject *py_st_read(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path_obj, *names = Py_None, *bytes_path = NULL;
    if (!PyArg_ParseTuple(args, "O|O", &path_obj, &names) || !PyUnicode_FSConverter(path_obj, &bytes_path))
        return NULL;
    mm_st_reader *reader = NULL;
    mm_error err = {0};
    mm_status st;
    const char *path = PyBytes_AS_STRING(bytes_path);
    Py_BEGIN_ALLOW_THREADS;
    st = mm_st_open(path, &reader, &err);
    Py_END_ALLOW_THREADS;
    Py_DECREF(bytes_path);
    if (st != MM_OK) return mm_py_raise(&err, NULL);
    PyObject *list = PyList_New(0), *meta = PyDict_New(), *result = NULL;
    if (!list || !meta) goto done;
    if (names == Py_None) {
        for (size_t i = 0; i < mm_st_tensor_count(reader); i++) {
            PyObject *item = read_one(reader, mm_st_tensor_at(reader, i));
            if (!item || PyList_Append(list, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        }
    } else {
        PyObject *it = PyObject_GetIter(names), *name;
        if (!it) goto done;
        while ((name = PyIter_Next(it))) {
            const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
            const mm_st_tensor_info *info = s ? mm_st_find(reader, s) : NULL;
            PyObject *item = NULL;
            if (!s)
                mm_py_invalid("names: tensor names must be strings");
            else if (!info)
                PyErr_Format(PyExc_KeyError, "no tensor '%s' in the file", s);
            else
                item = read_one(reader, info);
            Py_DECREF(name);
            if (!item || PyList_Append(list, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(it);
                goto done;
            }
            Py_DECREF(item);
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) goto done;
    }
    for (size_t i = 0; i < mm_st_metadata_count(reader); i++) {
        const char *k, *v;
        mm_st_metadata_at(reader, i, &k, &v);
        PyObject *value = PyUnicode_FromString(v);
        if (!value || PyDict_SetItemString(meta, k, value) < 0) {
            Py_XDECREF(value);
            goto done;
        }
        Py_DECREF(value);
    }
    result = Py_BuildValue("(OO)", list, meta);
done:
    Py_XDECREF(list);
    Py_XDECREF(meta);
    mm_st_close(reader);
    return result;
}

/* st_write(path, [(name, spec), ...], {metadata}) */
static PyObject *py_st_write(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path_obj, *tensors, *meta, *bytes_path = NULL;
    if (!PyArg_ParseTuple(args, "OO!O!", &path_obj, &PyList_Type, &tensors, &PyDict_Type, &meta) ||
        !PyUnicode_FSConverter(path_obj, &bytes_path))
        return NULL;
    mm_st_writer *writer = NULL;
    mm_error err = {0};
    PyObject *result = NULL;
    if (mm_st_writer_create(&writer, &err) != MM_OK) {
        mm_py_raise(&err, NULL);
        goto done;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(meta, &pos, &key, &value)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        const char *v = PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : NULL;
        if (!k || !v) {
            mm_py_invalid("metadata keys and values must be strings");
            goto done;
        }
        if (mm_st_writer_set_metadata(writer, k, v, &err) != MM_OK) {
            mm_py_raise(&err, NULL);
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tensors); i++) {
        PyObject *pair = PyList_GET_ITEM(tensors, i);
        const char *name = NULL;
        PyObject *spec = NULL;
        if (!PyArg_ParseTuple(pair, "sO", &name, &spec)) goto done;
        mm_py_tensor t;
        if (mm_py_tensor_parse(spec, name, 0, 0, &t) < 0) goto done;
        mm_status st = mm_st_writer_add(writer, name, &t.t, &err); /* copies the data */
        mm_py_tensor_release(&t);
        if (st != MM_OK) {
            mm_py_raise(&err, NULL);
            goto done;
        }
    }
    const char *path = PyBytes_AS_STRING(bytes_path);
    mm_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = mm_st_writer_write(writer, path, &err);
    Py_END_ALLOW_THREADS;
    if (st != MM_OK)
        mm_py_raise(&err, NULL);
    else
        result = Py_NewRef(Py_None);
done:
    Py_XDECREF(bytes_path);
    mm_st_writer_destroy(writer);
    return result;
}

/* case_run(in_path, out_path, backend="threads", timeout_seconds=0.0, memory_budget_bytes=0) */
static PyObject *py_case_run(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kwlist[] = {"in_path", "out_path", "backend", "timeout_seconds", "memory_budget_bytes",
                             NULL};
    PyObject *in_obj, *out_obj, *in_b = NULL, *out_b = NULL;
    const char *backend = "threads";
    double timeout = 0;
    unsigned long long budget = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|sdK", kwlist, &in_obj, &out_obj, &backend, &timeout,
                                     &budget))
        return NULL;
    mm_case_options opt = {.timeout_seconds = timeout, .memory_budget_bytes = budget};
    if (!strcmp(backend, "mpi"))
        opt.backend = MM_CASE_BACKEND_MPI;
    else if (strcmp(backend, "threads"))
        return mm_py_invalid("backend '%s' (must be threads or mpi)", backend);
    if (!PyUnicode_FSConverter(in_obj, &in_b)) return NULL;
    if (!PyUnicode_FSConverter(out_obj, &out_b)) {
        Py_DECREF(in_b);
        return NULL;
    }
    mm_error err = {0};
    mm_status st;
    const char *in_path = PyBytes_AS_STRING(in_b), *out_path = PyBytes_AS_STRING(out_b);
    Py_BEGIN_ALLOW_THREADS;
    st = mm_case_run(in_path, out_path, &opt, &err);
    Py_END_ALLOW_THREADS;
    Py_DECREF(in_b);
    Py_DECREF(out_b);
    if (st != MM_OK) return mm_py_raise(&err, NULL);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"st_read", py_st_read, METH_VARARGS, "st_read(path, names=None) -> (tensors, metadata)."},
    {"st_write", py_st_write, METH_VARARGS, "st_write(path, [(name, spec)], metadata)."},
    {"case_run", (PyCFunction)(void (*)(void))py_case_run, METH_VARARGS | METH_KEYWORDS,
     "case_run(in_path, out_path, backend='threads', timeout_seconds=0, memory_budget_bytes=0)."},
    {NULL, NULL, 0, NULL},
};

int mm_py_init_safetensors(PyObject *module) {
    return PyModule_AddFunctions(module, methods);
}
