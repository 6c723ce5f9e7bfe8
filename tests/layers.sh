#!/usr/bin/env bash
# layers.sh: core/ is a stack of layers whose includes only run downwards
# (README, "Architecture"):
#   1 inputs      the model, the GPU, the cluster and its bandwidth cache, a
#                 configuration and its pins; training logs; errors, files, JSON
#   2 estimators  pure functions of the inputs: memory, schedules, time
#   3 planning    search, mapping, the plan, expert placement
#   4 rendering   what the plan becomes: tables, JSON, environment, launch
#                 arguments, SVG, and the command line
# Every file of core/ must be in the table below; an include of a higher
# layer fails.  `layers.sh --dot` prints the include graph for Graphviz
# (make graph, which draws its transitive reduction).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top/core"

layer_of() {	# file name (without directory) -> layer number
	case $1 in
	error.[ch]|readfile.[ch]|json.[ch]|rng.h|model.[ch]|hardware.[ch]|calib.[ch]|config.[ch]|stack.[ch]|\
	bwcache.[ch]|bwcache_int.h|bwcache_io.c|bwcache_parse.c|bwmat.c|bwscan.c|bwgroup.c|bwgen.c|bwimport.c|\
	cluster.[ch]|limits.h|trainlog.[ch])
		echo 1 ;;
	memory.[ch]|schedule.[ch]|timing.[ch])
		echo 2 ;;
	search.[ch]|mapping.[ch]|mapping_int.h|mapping_links.c|plan.[ch]|plan_int.h|request.[ch]|experts.[ch]|experts_int.h|experts_ilp.c)
		echo 3 ;;
	timeline_svg.c|render/*|cli/*)
		echo 4 ;;
	*)	echo 0 ;;
	esac
}
name=(- inputs estimators planning rendering)

files=$(find . -name '*.[ch]' | sed 's|^\./||' | sort)
bad=0
edges=
for f in $files; do
	lf=$(layer_of "$f")
	if [ "$lf" = 0 ]; then
		echo "layers: core/$f is in no layer: add it to tests/layers.sh" >&2
		bad=1
		continue
	fi
	for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		hb=$(basename "$h")
		lh=$(layer_of "$hb")
		[ "$lh" = 0 ] && continue	# autoconf.h and the like
		if [ "$lh" -gt "$lf" ]; then
			echo "layers: core/$f (${name[$lf]}) includes $h (${name[$lh]}): an include that runs upwards" >&2
			bad=1
		fi
		# the graph joins a module's .c, .h and private _int.h
		a=${f%.*}; b=${hb%.*}; a=${a%_int}; b=${b%_int}
		[ "${a##*/}" != "$b" ] && edges+="$a $b"$'\n'
	done
done
if [ "${1:-}" = --dot ]; then
	echo 'digraph core { rankdir=TB; node [shape=box, fontname="sans"];'
	for l in 4 3 2 1; do
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
	echo "layers: $(echo "$files" | wc -l) files of core/, no include runs upwards"
fi
exit "$bad"
