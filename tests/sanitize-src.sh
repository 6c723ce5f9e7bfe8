# Sourced by tests/sanitize.sh and tests/sanitize-plugin.sh: sets srcdir.
# configure refuses a separate build directory when the source tree is
# configured in place (as .ci/run does): build from a clean copy of the
# distributed sources then, made once by `make distdir` and shared with the
# other script through SANITIZE_SRCDIR.
# shellcheck shell=bash
srcdir=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${SANITIZE_SRCDIR:-}" ]; then
	srcdir=$SANITIZE_SRCDIR
elif [ -f "$srcdir/config.status" ]; then
	copy=$srcdir/tests/sanitize-src
	rm -rf "$copy"
	make -s -C "$srcdir" distdir distdir="$copy" >/dev/null || {
		echo "sanitize: FAIL: make distdir" >&2; exit 1; }
	export SANITIZE_SRCDIR=$copy
	srcdir=$copy
fi
