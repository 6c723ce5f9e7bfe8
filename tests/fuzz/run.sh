#!/usr/bin/env bash
# Build pipette's libFuzzer harnesses (tests/fuzz/fuzz_*.c) with clang
# against the sources, replay the committed seeds and every past finding
# (tests/fuzz/regress/<parser>/), then fuzz each parser for FUZZ_SECONDS.
# Fails on any crash, leak, timeout or sanitizer report; the input that
# triggered it is kept under $FUZZ_BUILDDIR/artifacts/<parser>/.
#
#   FUZZ_SECONDS   seconds per harness (default 20; 0 = replay only)
#   FUZZ_JOBS      harnesses fuzzed at once (default: the CPU count)
#   FUZZ_BUILDDIR  objects, binaries, grown corpora, logs, artifacts
#                  (default ./fuzz-build)
#   FUZZ_ONLY      space-separated parser names to run (default all)
#   CLANG          the compiler (default clang, else clang-14)
#   FUZZ_CFLAGS    extra compiler flags (e.g. -fno-sanitize=pointer-overflow
#                  to look past a known report while it is being fixed)
#
# A harness whose first lines say "fuzz-requires: FILE" is skipped, with a
# note, while FILE does not exist (a parser still being written); one that
# says "fuzz-libs: -lX ..." links those libraries too.
set -uo pipefail

srcdir=$(cd "$(dirname "$0")/../.." && pwd)
fuzzdir=$srcdir/tests/fuzz
secs=${FUZZ_SECONDS:-20}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
build=${FUZZ_BUILDDIR:-$PWD/fuzz-build}
mkdir -p "$build" && build=$(cd "$build" && pwd)

cc=${CLANG:-}
if [ -z "$cc" ]; then
	for c in clang clang-14; do
		command -v "$c" >/dev/null && { cc=$c; break; }
	done
fi
[ -n "$cc" ] || { echo "fuzz: clang not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
jsonc_cflags=$(pkg-config --cflags json-c) || exit 1
jsonc_libs=$(pkg-config --libs json-c) || exit 1
# SHA-256 of the inputs (core/inputs/readfile.c) is GNU Nettle's.
nettle_cflags=$(pkg-config --cflags nettle) || exit 1
nettle_libs=$(pkg-config --libs nettle) || exit 1
# The expert placement (core/plan/experts.c) solves with GLPK (no .pc file).
libs="$jsonc_libs $nettle_libs -lm"
grep -q '<glpk.h>' "$srcdir"/core/*/*.c && libs="$libs -lglpk"

# -fno-sanitize-recover: UBSan aborts at the first report, so libFuzzer
# records it as a crash.  ASan's leak check runs after every input.
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
cflags="-std=gnu11 -g -O1 -fno-omit-frame-pointer $san -Wall -Wextra
	-iquote $srcdir/core -I$srcdir/plugin $jsonc_cflags $nettle_cflags ${FUZZ_CFLAGS:-}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
# libslurm's own leaks (tests/lsan.supp says which) are not pipette's.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$srcdir/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# The file-based harnesses write each input to a temporary file there.
mkdir -p "$build/tmp" && export TMPDIR=$build/tmp

# The library under test: the core's layers below rendering (and the
# timeline SVG), not its renderers or CLI, and the plugin's SPANK-free
# parsers.  Compiled with coverage (fuzzer-no-link) so libFuzzer sees it.
lib_srcs=$(ls "$srcdir"/core/{inputs,estimate,learn,plan}/*.c "$srcdir"/core/render/timeline_svg.c)
lib_srcs="$lib_srcs $srcdir/plugin/args.c $srcdir/plugin/parse.c"
mkdir -p "$build/obj" "$build/logs"
echo "fuzz: compiling the library with $cc ($(echo $lib_srcs | wc -w) files)"
# shellcheck disable=SC2086
if ! printf '%s\n' $lib_srcs | xargs -P "$jobs" -I{} sh -c \
	'f={}; o='"$build"'/obj/$(basename "$(dirname "$f")")_$(basename "$f" .c).o
	 '"$cc"' '"$(echo $cflags)"' -fsanitize=fuzzer-no-link -c "$f" -o "$o"'; then
	echo "fuzz: FAIL: the library does not compile with $cc" >&2
	exit 1
fi
rm -f "$build/libfuzz.a"
ar rcs "$build/libfuzz.a" "$build"/obj/*.o || exit 1

names=()
for h in "$fuzzdir"/fuzz_*.c; do
	name=$(basename "$h" .c)
	name=${name#fuzz_}
	if [ -n "${FUZZ_ONLY:-}" ] && [[ " $FUZZ_ONLY " != *" $name "* ]]; then
		continue
	fi
	req=$(sed -n '1,20s/.*fuzz-requires: *\([^ ]*\).*/\1/p' "$h" | head -1)
	if [ -n "$req" ] && [ ! -e "$srcdir/$req" ]; then
		echo "fuzz: SKIP $name: $req does not exist yet"
		continue
	fi
	# "fuzz-libs: -lX" in its first lines: libraries the harness links
	# beside the library under test (Slurm's hostlist functions).
	extra=$(sed -n '1,20s/.*fuzz-libs: *\(.*\)$/\1/p' "$h" | head -1)
	# shellcheck disable=SC2086
	if ! $cc $cflags -fsanitize=fuzzer "$h" "$build/libfuzz.a" $libs $extra \
		-o "$build/fuzz_$name" 2>"$build/logs/$name.build"; then
		cat "$build/logs/$name.build" >&2
		echo "fuzz: FAIL: harness $name does not build" >&2
		exit 1
	fi
	names+=("$name")
done

# One harness: replay seeds and past findings, then fuzz.  Writes its
# verdict to $build/logs/$name.rc.
fuzz_one() {
	local name=$1 bin=$build/fuzz_$1 log=$build/logs/$1.log
	local seeds=$fuzzdir/corpus/$1 regress=$fuzzdir/regress/$1
	local work=$build/corpus/$1 art=$build/artifacts/$1/ dict=$fuzzdir/$1.dict
	local files=() dirs=() opts=() rc=0
	rm -rf "$art"
	mkdir -p "$work" "$art"
	[ -f "$dict" ] && opts+=("-dict=$dict")
	opts+=(-artifact_prefix="$art" -timeout=10 -rss_limit_mb=2048 -max_len=16384
		-print_final_stats=1)
	: >"$log"
	for d in "$seeds" "$regress"; do
		[ -d "$d" ] || continue
		dirs+=("$d")
		while IFS= read -r -d '' f; do files+=("$f"); done \
			< <(find "$d" -type f ! -name '.*' -print0 | sort -z)
	done
	if ((${#files[@]})); then
		echo "== replay ${#files[@]} inputs" >>"$log"
		"$bin" "${opts[@]}" "${files[@]}" >>"$log" 2>&1 || rc=$?
	fi
	if [ "$rc" -eq 0 ] && [ "$secs" -gt 0 ]; then
		echo "== fuzz ${secs}s" >>"$log"
		"$bin" "${opts[@]}" -max_total_time="$secs" "$work" "${dirs[@]}" \
			>>"$log" 2>&1 || rc=$?
	fi
	echo "$rc" >"$build/logs/$name.rc"
}

running=0
for name in "${names[@]}"; do
	rm -f "$build/logs/$name.rc"
	fuzz_one "$name" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait

fail=0
for name in "${names[@]}"; do
	log=$build/logs/$name.log
	rc=$(cat "$build/logs/$name.rc" 2>/dev/null || echo 1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
	if [ "$rc" -eq 0 ]; then
		echo "fuzz: PASS $name (${execs:-0} runs, ${cov:-cov: ?})"
		continue
	fi
	fail=1
	echo "fuzz: FAIL $name (exit $rc); log: $log"
	grep -E 'ERROR: |runtime error:|fuzz: .*:[0-9]+:|SUMMARY:|Test unit written' "$log" | head -20
	# A failure while replaying: the committed input named last.
	if ! grep -q '^== fuzz' "$log"; then
		sed -n 's/^Running: /  failing input (replay): /p' "$log" | tail -1
	fi
	for a in "$build/artifacts/$name"/*; do
		[ -f "$a" ] || continue
		echo "  input kept: $a"
		echo "  make it a regression test: cp '$a' '$fuzzdir/regress/$name/'"
	done
done
exit "$fail"
