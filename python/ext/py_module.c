/* SPDX-License-Identifier: Apache-2.0 */
/* python/ext/py_module.c: the module `megamoe._megamoe`: its initialisation and the exceptions.
 *
 * Every mm_status other than MM_OK has its own exception class, all subclasses of megamoe.Error (and of
 * the builtin class a Python caller would catch: ValueError for input errors, MemoryError, OSError,
 * TimeoutError), carrying the library's one-line message and the status (.status, .status_name). */
#include "py_common.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct error_class {
    mm_status status;
    const char *name; /* attribute name in the module */
    PyObject **builtin_base;
    PyObject *type; /* created at import */
} error_class;

static PyObject *base_error;
static error_class error_classes[] = {
    {MM_ERR_INVALID_ARGUMENT, "InvalidArgumentError", &PyExc_ValueError, NULL},
    {MM_ERR_INVALID_FILE, "InvalidFileError", &PyExc_ValueError, NULL},
    {MM_ERR_OUT_OF_MEMORY, "OutOfMemoryError", &PyExc_MemoryError, NULL},
    {MM_ERR_IO, "IoError", &PyExc_OSError, NULL},
    {MM_ERR_UNSUPPORTED, "UnsupportedError", NULL, NULL},
    {MM_ERR_TIMEOUT, "CommTimeoutError", &PyExc_TimeoutError, NULL},
    {MM_ERR_PEER, "PeerError", NULL, NULL},
    {MM_ERR_INTERNAL, "InternalError", NULL, NULL},
};
enum { ERROR_CLASS_COUNT = sizeof error_classes / sizeof error_classes[0] };

static PyObject *class_of(mm_status status) {
    for (int i = 0; i < ERROR_CLASS_COUNT; i++)
        if (error_classes[i].status == status) return error_classes[i].type;
    return error_classes[ERROR_CLASS_COUNT - 1].type; /* an unknown status is a bug: InternalError */
}

static PyObject *raise_status(mm_status status, const char *message) {
    PyObject *cls = class_of(status);
    PyObject *exc = PyObject_CallFunction(cls, "s", message);
    if (!exc) return NULL;
    PyObject *code = PyLong_FromLong((long)status);
    PyObject *name = PyUnicode_FromString(mm_status_name(status));
    if (code && name && PyObject_SetAttrString(exc, "status", code) == 0 &&
        PyObject_SetAttrString(exc, "status_name", name) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
}

PyObject *mm_py_raise(const mm_error *err, const char *what) {
    char text[MM_ERROR_MESSAGE_MAX + 128];
    mm_status status = err->status == MM_OK ? MM_ERR_INTERNAL : err->status;
    if (what)
        snprintf(text, sizeof text, "%s: %s", what, err->message);
    else
        snprintf(text, sizeof text, "%s", err->message);
    return raise_status(status, text);
}

PyObject *mm_py_invalid(const char *fmt, ...) {
    char text[MM_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return raise_status(MM_ERR_INVALID_ARGUMENT, text);
}

int mm_py_init_errors(PyObject *module) {
    base_error = PyErr_NewExceptionWithDoc("megamoe.Error",
                                           "Base class of every error megamoe reports; .status is the "
                                           "mm_status code, .status_name its name, str() the message.",
                                           NULL, NULL);
    if (!base_error || PyModule_AddObjectRef(module, "Error", base_error) < 0) return -1;
    for (int i = 0; i < ERROR_CLASS_COUNT; i++) {
        error_class *c = &error_classes[i];
        char qualified[96];
        snprintf(qualified, sizeof qualified, "megamoe.%s", c->name);
        PyObject *bases =
            c->builtin_base ? PyTuple_Pack(2, base_error, *c->builtin_base) : PyTuple_Pack(1, base_error);
        if (!bases) return -1;
        c->type = PyErr_NewException(qualified, bases, NULL);
        Py_DECREF(bases);
        if (!c->type || PyModule_AddObjectRef(module, c->name, c->type) < 0) return -1;
        PyObject *code = PyLong_FromLong((long)c->status),
                 *name = PyUnicode_FromString(mm_status_name(c->status));
        int bad = !code || !name || PyObject_SetAttrString(c->type, "status", code) < 0 ||
                  PyObject_SetAttrString(c->type, "status_name", name) < 0;
        Py_XDECREF(code);
        Py_XDECREF(name);
        if (bad) return -1;
    }
    return 0;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "megamoe._megamoe",
    .m_doc = "C extension of the megamoe package (use the package `megamoe`, not this module).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__megamoe(void);
PyMODINIT_FUNC PyInit__megamoe(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (mm_py_init_errors(m) < 0 || mm_py_init_formats(m) < 0 || mm_py_init_safetensors(m) < 0 ||
        mm_py_init_mega_moe(m) < 0 || mm_py_init_experts(m) < 0 || mm_py_init_world(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
