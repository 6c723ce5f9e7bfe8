#!/usr/bin/env bash
# funclen.sh: no function of core/, plugin/ or probe/ is longer than 120
# lines.  A function's length is counted from the line of the opening brace
# of its body to the line of its closing brace, both included (the code
# style puts both alone at column 0, so they are found without a parser).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
max=${FUNCLEN_MAX:-120}
cd "$top"
awk -v max="$max" '
	FNR == 1 { sig = ""; open = 0 }
	/^[A-Za-z_].*\(/ && !open { sig = $0 }
	/^\{$/ && !open { open = FNR; next }
	/^\}/ && open {
		n = FNR - open + 1
		if (n > max) {
			name = sig; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
			printf "funclen: %s: %s is %d lines (limit %d)\n", FILENAME, name, n, max
			bad = 1
		}
		longest = n > longest ? n : longest
		open = 0
	}
	END {
		if (!bad) printf "funclen: no function over %d lines (longest %d)\n", max, longest
		exit bad
	}' core/*/*.c plugin/*.c probe/*.c
