#!/bin/sh
# make check: the Python binding's tests (tests/python/test_*.py, stdlib
# unittest) with the interpreter configure built it for (PIPETTE_PYTHON:
# Debian's /usr/bin/python3 by default), on the package as built in the
# tree: python/test-pkg/pipette holds links to the sources and to the
# module libtool built.  77 (SKIP) when configure did not build the binding.
set -eu
build=${PIPETTE_BUILDDIR:?run by make check}
src=${PIPETTE_PYTHON_SRC:?run by make check}
py=${PIPETTE_PYTHON:-}
so=$build/python/.libs/_pipette.so
if [ -z "$py" ] || [ "$py" = : ] || [ ! -f "$so" ]; then
	echo "SKIP: the Python binding was not built (configure: no Python.h; Debian: python3-dev)"
	exit 77
fi
pkg=$build/python/test-pkg/pipette
rm -rf "$pkg"
mkdir -p "$pkg"
for f in "$src"/pipette/*.py; do
	ln -s "$f" "$pkg/"
done
ln -s "$so" "$pkg/_pipette.so"
PYTHONPATH=$build/python/test-pkg
PIPETTE_BIN=$build/pipette
PIPETTE_SRCDIR=$(dirname "$src")
export PYTHONPATH PIPETTE_BIN PIPETTE_SRCDIR
# -I would drop PYTHONPATH; -s leaves out the user's site-packages and -B
# keeps __pycache__ out of the source tree.
exec "$py" -s -B -m unittest discover -s "$PIPETTE_SRCDIR/tests/python" -p 'test_*.py' -v
