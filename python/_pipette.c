/* pipette._pipette: the CPython extension under `import pipette`.  One
 * function, call(command, args), over pipette_cli_call (core/cli/api.h);
 * the package (python/pipette/__init__.py) parses the JSON and raises
 * pipette.Error. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "autoconf.h"

#include "cli/api.h"

/* A C string of the command's output as str (invalid UTF-8, from a file
 * name in a message, is replaced rather than refused). */
static PyObject *text(const char *s)
{
	return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static PyObject *pipette_call(PyObject *self, PyObject *args)
{
	const char *cmd, **argv = NULL;
	PyObject *seq, *items = NULL, *result = NULL;
	char *out = NULL, *err = NULL;
	Py_ssize_t i, n, len;
	int rc;

	(void)self;
	if (!PyArg_ParseTuple(args, "sO:call", &cmd, &seq))
		return NULL;
	/* a tuple of our own: its strings live while the GIL is released */
	if (!(items = PySequence_Tuple(seq)))
		return NULL;
	n = PyTuple_GET_SIZE(items);
	if (n > 4096) {
		PyErr_SetString(PyExc_ValueError, "call: more than 4096 arguments");
		goto out;
	}
	if (!(argv = PyMem_Calloc((size_t)n + 1, sizeof(*argv)))) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < n; i++) {
		PyObject *a = PyTuple_GET_ITEM(items, i);

		if (!PyUnicode_Check(a)) {
			PyErr_Format(PyExc_TypeError, "call: argument %zd is %.64s, not str", i,
				     Py_TYPE(a)->tp_name);
			goto out;
		}
		if (!(argv[i] = PyUnicode_AsUTF8AndSize(a, &len)))
			goto out;
		if (strlen(argv[i]) != (size_t)len) {
			PyErr_Format(PyExc_ValueError, "call: argument %zd has a NUL character", i);
			goto out;
		}
	}
	Py_BEGIN_ALLOW_THREADS
	rc = pipette_cli_call(cmd, (int)n, argv, &out, &err);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		PyErr_NoMemory();
		goto out;
	}
	{
		PyObject *o = text(out), *e = text(err);

		if (o && e)
			result = Py_BuildValue("(iOO)", rc, o, e);
		Py_XDECREF(o);
		Py_XDECREF(e);
	}
out:
	free(out);
	free(err);
	PyMem_Free(argv);
	Py_XDECREF(items);
	return result;
}

static PyMethodDef pipette_methods[] = {
	{ "call", pipette_call, METH_VARARGS,
	  "call(command, args) -> (status, stdout, stderr)\n\n"
	  "Run `pipette COMMAND ARGS... --format json` in this process (command:\n"
	  "plan, estimate, models, stacks or gpus; args: a sequence of str).\n"
	  "status is the command's exit status (0 ok, 1 no fit, 2 bad input)." },
	{ NULL, NULL, 0, NULL }
};

static struct PyModuleDef pipette_module = {
	PyModuleDef_HEAD_INIT, "pipette._pipette",
	"libpipette, the planner of the pipette command, as one call.", -1, pipette_methods,
	NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit__pipette(void);

PyMODINIT_FUNC PyInit__pipette(void)
{
	PyObject *m = PyModule_Create(&pipette_module);

	if (m && PyModule_AddStringConstant(m, "version", PACKAGE_VERSION)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
