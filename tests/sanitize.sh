#!/usr/bin/env bash
# Build pipette in a separate directory with AddressSanitizer and
# UndefinedBehaviorSanitizer and run the Check unit tests there, failing on
# any sanitizer report or leak; then the integration tests against a gcc
# UBSan build, the plugin inside the test cluster's Slurm daemons
# (tests/sanitize-plugin.sh; root only; why not ASan there:
# tests/integration/README.md); then cppcheck over the sources.  Ends with
# one line per part.
#
#   SANITIZE_BUILDDIR  the build directory (default ./sanitize-build)
#   SANITIZE_CC        the compiler (default clang, else gcc)
#   SANITIZE_JOBS      make -j (default: the CPU count)
#   SANITIZE_PLUGIN    0 skips the integration tests (default 1)
#   SANITIZE_CPPCHECK  0 skips cppcheck (default 1)
set -uo pipefail

# srcdir: a source tree that configures out of place (sanitize-src.sh).
# shellcheck source-path=SCRIPTDIR source=sanitize-src.sh
. "$(dirname "$0")/sanitize-src.sh"
build=${SANITIZE_BUILDDIR:-$PWD/sanitize-build}
jobs=${SANITIZE_JOBS:-$(nproc 2>/dev/null || echo 2)}
cc=${SANITIZE_CC:-}
if [ -z "$cc" ]; then
	for c in clang clang-14 gcc; do
		command -v "$c" >/dev/null && { cc=$c; break; }
	done
fi
mkdir -p "$build" && build=$(cd "$build" && pwd)

# abort_on_error: a report fails the test program, so `make check` fails.
# halt_on_error (UBSan): the first report stops the program; the build's
# -fno-sanitize-recover does the same for checks that could continue.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Leaks in libraries pipette does not own, each explained in the file.
export LSAN_OPTIONS=suppressions=$srcdir/tests/lsan.supp:print_suppressions=0
san='-fsanitize=address,undefined -fno-sanitize-recover=all'
cflags="-O1 -g $san -fno-omit-frame-pointer"
rc=0

if [ ! -f "$srcdir/configure" ]; then
	(cd "$srcdir" && autoreconf -fi) || exit 1
fi
cd "$build" || exit 1
# Reconfigure when the compiler or flags change (config.status records them).
if [ ! -f Makefile ] || ! grep -qF -- "$san" config.status 2>/dev/null ||
	! grep -q "CC='$cc'" config.status 2>/dev/null; then
	echo "sanitize: configuring $build with CC=$cc CFLAGS='$cflags'"
	# (configure's "rm -f core" complains about the core/ build directory.)
	"$srcdir/configure" -q CC="$cc" CFLAGS="$cflags" LDFLAGS="$san" \
		2> >(grep -v "cannot remove 'core'" >&2) || exit 1
fi
echo "sanitize: building"
make -s -j"$jobs" >build.log 2>&1 || { tail -50 build.log; echo "sanitize: FAIL: build" >&2; exit 1; }

# The unit tests: every entry of TESTS under tests/unit/.
unit=$(make -s -f Makefile -f - print-unit-tests 2>/dev/null <<'MK'
print-unit-tests:
	@echo $(filter tests/unit/%,$(TESTS))
MK
)
# (make may first regenerate the Makefile and say so: keep the names only.)
unit=$(printf '%s\n' $unit | grep '^tests/unit/' | tr '\n' ' ')
[ -n "$unit" ] || { echo "sanitize: FAIL: no unit tests found" >&2; exit 1; }
echo "sanitize: running $(echo "$unit" | wc -w) unit test programs under ASan+UBSan"
# Check forks a child per test: a report aborts the child (abort_on_error;
# a leak makes it exit non-zero), which Check counts as a failed test.
if ! make -s -j"$jobs" check TESTS="$unit" >check.log 2>&1; then
	rc=1
	echo "sanitize: FAIL: unit tests" >&2
	grep -E '^(FAIL|ERROR):' check.log
fi
# Every distinct report once, with the first stack that led to it (also
# catches a report that Check counted as a passed test).
pat='ERROR: (Address|Leak)Sanitizer|runtime error:'
if grep -qE "$pat" tests/unit/*.log 2>/dev/null; then
	rc=1
	echo "sanitize: FAIL: sanitizer reports (full text in $build/tests/unit/*.log):" >&2
	grep -hE "$pat" tests/unit/*.log | sed 's/0x[0-9a-f]*/0x?/g; s/==[0-9]*==//' |
		sort | uniq -c | sort -rn
	for l in $(grep -lE "$pat" tests/unit/*.log); do
		echo "== first report in $l"
		grep -m1 -E -A8 "$pat" "$l"
	done
fi
if [ "$rc" -eq 0 ]; then
	summary="PASS unit tests under ASan+UBSan ($(grep -h '^# PASS:' test-suite.log 2>/dev/null | awk '{print $3}') programs)"
else
	summary="FAIL unit tests under ASan+UBSan"
fi
echo "sanitize: $summary"

# The integration tests: the plugin under UBSan (a gcc build next to this
# one), pipette and pipette-probe from this ASan+UBSan build.
if [ "${SANITIZE_PLUGIN:-1}" != 0 ]; then
	prc=0
	SANITIZE_PLUGIN_BUILDDIR=${SANITIZE_PLUGIN_BUILDDIR:-$build-plugin} \
		SANITIZE_ASAN_BUILDDIR=$build \
		bash "$srcdir/tests/sanitize-plugin.sh" || prc=$?
	case $prc in
	0) summary="$summary"$'\n'"PASS integration tests: plugin under UBSan in srun/sbatch/salloc/slurmd/slurmstepd, pipette and pipette-probe under ASan+UBSan" ;;
	77) summary="$summary"$'\n'"SKIP integration tests under UBSan (not root)" ;;
	*) rc=1; summary="$summary"$'\n'"FAIL integration tests under UBSan" ;;
	esac
fi

# Static analysis.  Suppressions are inline (// cppcheck-suppress id) next
# to the code, each with the reason; none are global.
if [ "${SANITIZE_CPPCHECK:-1}" != 0 ]; then
	if command -v cppcheck >/dev/null; then
		echo "sanitize: cppcheck"
		if ! (cd "$srcdir" && cppcheck -q --enable=warning,performance,portability \
			--error-exitcode=1 --inline-suppr -I core \
			core plugin probe) >cppcheck.log 2>&1; then
			cat cppcheck.log
			echo "sanitize: FAIL: cppcheck" >&2
			rc=1
			summary="$summary"$'\n'"FAIL cppcheck"
		else
			summary="$summary"$'\n'"PASS cppcheck"
		fi
	else
		echo "sanitize: cppcheck not installed; skipped" >&2
		summary="$summary"$'\n'"SKIP cppcheck (not installed)"
	fi
fi
echo "sanitize: summary:"
printf '%s\n' "$summary" | sed 's/^/  /'
exit "$rc"
