#!/usr/bin/env bash
# layers.sh: core/ is a stack of layers, one folder each, whose includes only
# run downwards (README, "Architecture"):
#   1 inputs/    the model, the GPU, the stack, the cluster and its bandwidth
#                cache, a configuration and its pins; training logs; errors,
#                files, JSON
#   2 estimate/  pure functions of the inputs: memory, schedules, time
#   3 learn/     the site's calibration fitted from observed jobs
#   4 plan/      request resolution, search, mapping, the plan, expert placement
#   5 render/, cli/  what the plan becomes: tables, JSON, environment, launch
#                arguments, SVG, and the command line
# A file's layer is its folder; a file outside these folders, or an include
# of a higher layer, fails.  Includes name the folder ("estimate/timing.h").
# `layers.sh --dot` prints the include graph for Graphviz (make graph, which
# draws its transitive reduction).
set -euo pipefail
build=$PWD	# make check runs here: the objects of plugin/
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top/core"

layer_of() {	# path below core/ -> layer number (0: none)
	case $1 in
	inputs/*) echo 1 ;;
	estimate/*) echo 2 ;;
	learn/*) echo 3 ;;
	plan/*) echo 4 ;;
	render/*|cli/*) echo 5 ;;
	*)	echo 0 ;;
	esac
}
name=(- inputs estimate learn plan rendering)

files=$(find . -name '*.[ch]' | sed 's|^\./||' | sort)
bad=0
edges=
for f in $files; do
	lf=$(layer_of "$f")
	if [ "$lf" = 0 ]; then
		echo "layers: core/$f is in no layer's folder (inputs, estimate, learn, plan, render, cli)" >&2
		bad=1
		continue
	fi
	for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		[ -f "$(dirname "$f")/$h" ] && h=$(dirname "$f")/$h	# beside the file
		h=${h#./}
		[ -f "$h" ] || continue	# autoconf.h and the like
		lh=$(layer_of "$h")
		if [ "$lh" -gt "$lf" ]; then
			echo "layers: core/$f (${name[$lf]}) includes $h (${name[$lh]}): an include that runs upwards" >&2
			bad=1
		fi
		# the graph joins a module's .c, .h and private _int.h
		a=${f%.*}; b=${h%.*}; a=${a%_int}; b=${b%_int}
		[ "$a" != "$b" ] && edges+="$a $b"$'\n'
	done
done
# No circle between modules, inside a layer either: tsort names one.
loops=$(printf '%s' "$edges" | sort -u | tsort 2>&1 >/dev/null || true)
if [ -n "$loops" ]; then
	echo "layers: an include circle through:" $(printf '%s\n' "$loops" | sed -n 's/^tsort: \([^:]*\)$/\1/p' | sort -u) >&2
	bad=1
fi
# plugin/'s files all include plugin.h, so its circles are calls: file a
# calls a function that file b defines, and b calls back (nm on the built
# objects; skipped before a build).
objs=$(ls "$build"/plugin/.libs/spank_pipette_la-*.o 2>/dev/null || true)
if [ -n "$objs" ]; then
	declare -A defined_in
	for o in $objs; do
		for sym in $(nm --defined-only -g "$o" | awk '$2 ~ /[TDBR]/ { print $3 }'); do
			defined_in[$sym]=$(basename "$o" .o)
		done
	done
	calls=
	for o in $objs; do
		a=$(basename "$o" .o)
		for sym in $(nm -u "$o" | awk '{ print $2 }'); do
			b=${defined_in[$sym]:-}
			[ -n "$b" ] && [ "$b" != "$a" ] && calls+="${a#spank_pipette_la-} ${b#spank_pipette_la-}"$'\n'
		done
	done
	loops=$(printf '%s' "$calls" | sort -u | tsort 2>&1 >/dev/null || true)
	if [ -n "$loops" ]; then
		echo "layers: plugin/ files that call each other:" $(printf '%s\n' "$loops" | sed -n 's/^tsort: \([^:]*\)$/\1.c/p' | sort -u) >&2
		bad=1
	fi
fi
if [ "${1:-}" = --dot ]; then
	echo 'digraph core { rankdir=TB; node [shape=box, fontname="sans"];'
	for l in 5 4 3 2 1; do
		echo "  subgraph cluster_$l { label=\"${l}. ${name[$l]}\"; style=rounded;"
		for f in $files; do
			[ "$(layer_of "$f")" = "$l" ] || continue
			m=${f%.*}
			m=${m%_int}
			case $m in cli/*) m=cli ;; esac	# the command line is one node
			echo "    \"$m\";"
		done | sort -u
		echo '  }'
	done
	printf '%s' "$edges" | sed 's|^cli/[^ ]*|cli|' | sort -u |
		awk '$1 != $2 { printf "  \"%s\" -> \"%s\";\n", $1, $2 }'
	echo '}'
fi
if [ "$bad" = 0 ] && [ "${1:-}" != --dot ]; then
	echo "layers: $(echo "$files" | wc -l) files of core/, no include runs upwards, no circle in core/${objs:+ or plugin/}"
fi
exit "$bad"
