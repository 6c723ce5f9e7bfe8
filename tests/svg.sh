#!/usr/bin/env bash
# svg.sh: every SVG pipette draws, rendered by a real renderer.
#
# The pipeline timeline (pipette estimate --timeline) at 8 and at 256
# micro-batches (windowed) and interleaved; the bandwidth heatmap (pipette
# bandwidth show --svg) of the 16-node example and of a 600-node cache
# (cells of 3 x 3 node pairs) with switches and NVLink domains; the observe
# report (pipette observe --report) of a store of 40 jobs of 3 models.
# Each file must be well-formed XML (xmllint), render with librsvg's
# rsvg-convert without a word on stderr into a PNG that is one (its
# signature), of a sane size (IHDR width and height), and not blank; and
# say what its figure must say (the configuration in the timeline's title,
# the breaks, the colour bar and boundaries of the heatmap, the report's
# legends).  Skips (77) when rsvg-convert or xmllint is not installed
# (.ci/install-deps installs both: librsvg2-bin, libxml2-utils).
set -uo pipefail
build=${PIPETTE_BUILDDIR:-$PWD}
top=$(cd "$(dirname "$0")/.." && pwd)
BIN=$build/pipette
for tool in rsvg-convert xmllint; do
	command -v "$tool" >/dev/null || { echo "svg.sh: SKIP: no $tool"; exit 77; }
done
T=$(mktemp -d /tmp/pipette-svg.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "svg.sh: FAIL: $*" >&2; fails=$((fails + 1)); }
ok() { echo "svg.sh: ok: $*"; }

# The PNG's width and height from its IHDR chunk (bytes 16..23, big-endian).
png_size() {
	local hex
	hex=$(od -An -tx1 -j16 -N8 "$1" | tr -d ' \n')
	echo "$((16#${hex:0:8})) $((16#${hex:8:8}))"
}

# render NAME MAXPX: xmllint, rsvg-convert, the PNG's signature, size and
# content (a blank page compresses to under 4 KB at these sizes).
render() {
	local svg=$T/$1.svg png=$T/$1.png max=$2 w h
	xmllint --noout "$svg" 2>"$T/xmllint.err" || { fail "$1: not well-formed: $(head -3 "$T/xmllint.err")"; return; }
	if ! rsvg-convert -o "$png" "$svg" 2>"$T/rsvg.err" || [ -s "$T/rsvg.err" ]; then
		fail "$1: rsvg-convert: $(head -3 "$T/rsvg.err")"
		return
	fi
	[ "$(od -An -tx1 -N8 "$png" | tr -d ' \n')" = 89504e470d0a1a0a ] || { fail "$1: not a PNG"; return; }
	read -r w h < <(png_size "$png")
	if [ "$w" -lt 300 ] || [ "$h" -lt 150 ] || [ "$w" -gt "$max" ] || [ "$h" -gt "$max" ]; then
		fail "$1: rendered ${w}x${h} px, expected 300..$max by 150..$max"
		return
	fi
	[ "$(stat -c %s "$png")" -gt 4096 ] || { fail "$1: the PNG is blank ($(stat -c %s "$png") bytes)"; return; }
	ok "$1: ${w}x${h} px"
}

# has NAME TEXT [COUNT]: the SVG holds TEXT (COUNT times, when given).
has() {
	local n
	n=$(grep -o -F -- "$2" "$T/$1.svg" | wc -l)
	if [ -n "${3:-}" ] && [ "$n" != "$3" ]; then
		fail "$1: '$2' $n times, expected $3"
	elif [ -z "${3:-}" ] && [ "$n" = 0 ]; then
		fail "$1: no '$2'"
	fi
}

# ---- the pipeline timeline
est() { "$BIN" estimate --model llama3-70b --gpu H100 --tp 8 --seq-len 8192 --sequence-parallel \
	--distributed-optimizer "$@" >/dev/null || fail "estimate $*"; }
est --pp 4 --dp 4 --global-batch 32 --timeline "$T/timeline8.svg"
render timeline8 2000
has timeline8 "TP 8, PP 4, DP 4, CP 1; 1f1b, 8 micro-batches of 1"
has timeline8 " left out</text>" 0
has timeline8 "<title>rank" 64		# 4 ranks x 8 micro-batches x F, B
est --pp 4 --dp 4 --global-batch 1024 --timeline "$T/timeline256.svg"
render timeline256 2000
has timeline256 "256 micro-batches of 1 (global batch 1024)"
has timeline256 " left out</text>" 2
has timeline256 "bubble "
has timeline256 "DP gradient sync"
has timeline256 "optimizer step"
[ "$(stat -c %s "$T/timeline256.svg")" -lt 200000 ] || fail "timeline256: $(stat -c %s "$T/timeline256.svg") bytes"
est --pp 8 --dp 2 --vpp 5 --schedule interleaved --global-batch 512 --timeline "$T/interleaved.svg"
render interleaved 2000
has interleaved "5 chunks per rank; interleaved, 256 micro-batches"
has interleaved " left out</text>" 2

# ---- the bandwidth heatmap
"$BIN" bandwidth show "$top/etc/examples/hetero-16x8-h100.json" --switch-size 4 --nvlink-domain 16 \
	--svg "$T/heat16.svg" >/dev/null 2>&1 || fail "bandwidth show 16 nodes"
render heat16 2000
has heat16 "Inter-node bandwidth, 16 nodes (hetero-16x8-h100.json)"
has heat16 '<linearGradient id="viridis"'
has heat16 ">GB/s</text>"
has heat16 "switch boundary"
has heat16 ">NVLink domain</text>"
has heat16 "<title>node1 -&gt; node2: "
"$BIN" bandwidth generate --seed 3 --nodes 600 --gpus-per-node 4 --gpu GB200 --switch-size 100 \
	--cross-factor 0.6 --slow-switch 2:0.5 -o "$T/bw600.json" >/dev/null 2>&1 || fail "generate 600 nodes"
"$BIN" bandwidth show "$T/bw600.json" --gpu GB200 --switch-size 100 --worst 0 \
	--svg "$T/heat600.svg" >/dev/null 2>&1 || fail "bandwidth show 600 nodes"
render heat600 2000
has heat600 "each cell the median of 3 x 3 node pairs"
has heat600 "GB/s (log scale)"		# NVLink inside the GB200 racks, the network between
has heat600 "switch boundary"
has heat600 "NVLink domain"
has heat600 " pairs)</title>" $((200 * 200))	# 600 nodes in cells of 3: 200 x 200

# ---- the observe report: 40 jobs of 3 models, 2 stages each
mkdir "$T/store"
awk -v dir="$T/store" 'BEGIN {
	split("llama3-8b llama3-70b mixtral-8x7b", model, " ")
	for (i = 0; i < 40; i++) {
		meas = 0.5 + (i * 37 % 100) / 4; pred = meas * (0.85 + (i * 13 % 31) / 100)
		h = sprintf("%016x", 4096 + i * 7919); sha = h h h h
		f = sprintf("%s/%s-%s.json", dir, h, substr(sha, 1, 16))
		printf "{\"schema\":\"pipette-obs/1\",\"gpu\":\"H100-SXM-80GB\",\"stack\":\"megatron\"," \
			"\"model\":\"%s\",\"plan_hash\":\"%s\",\"log_sha256\":\"%s\",\"predicted\":" \
			"{\"iteration_s\":%g,\"compute_s\":%g,\"comm_s\":%g},\"measured\":{\"iteration_s\":%g}," \
			"\"stages\":[{\"base_bytes\":3e10,\"transient_bytes\":1e10,\"measured_reserved_bytes\":" \
			"%g,\"predicted_bytes\":%g},{\"base_bytes\":3e10,\"transient_bytes\":1e10," \
			"\"measured_reserved_bytes\":0,\"predicted_bytes\":4e10}]}\n",
			model[i % 3 + 1], h, sha, pred, pred * 0.7, pred * 0.3, meas,
			4e10 + i * 5e8, 4.1e10 + i * 4e8 > f
	}
}'
"$BIN" observe --report "$T/store" --svg "$T/report.svg" >/dev/null 2>&1 || fail "observe --report"
render report 2000
has report "class='obs-step'" 40
has report "class='obs-mem'" 40
has report "predicted = measured" 2
has report "predicted &#177;10% off" 2
has report ">jobs</text>"
has report "llama3-70b (13)"
has report "(log scale)"	# step times from 0.5 to 25 s

if [ "$fails" -gt 0 ]; then
	echo "svg.sh: $fails failure(s); the files were in $T" >&2
	exit 1
fi
echo "svg.sh: every SVG renders"
