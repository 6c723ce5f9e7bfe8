#!/usr/bin/env bash
# Golden outputs of a fixed set of `pipette plan` and `pipette estimate`
# commands (table, JSON, env, Megatron).  `run.sh OUTDIR` writes one file per
# command; `run.sh --check DIR` compares with a stored set, byte for byte.
# Used to show that a refactoring changes no figure.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
pipette=${PIPETTE:-$top/pipette}
ex=$top/etc/examples
mode=write
if [ "${1:-}" = --check ]; then mode=check; shift; fi
ref=${1:?usage: run.sh [--check] DIR}
out=$ref
[ "$mode" = check ] && out=$(mktemp -d)
mkdir -p "$out"

run() {	# name, then the pipette arguments
	local name=$1; shift
	# The search's wall time is the one figure that may differ.
	{ "$pipette" "$@" 2>&1 || echo "exit $?"; } |
		sed -E 's/; [0-9]+\.[0-9]+ s$/; (time) s/' >"$out/$name"
}
h16="--bandwidth $ex/hetero-16x8-h100.json --nodes 16 --gpu h100"
for fmt in table json env megatron; do
	run plan-70b-$fmt plan --model llama3-70b $h16 --global-batch 512 --seq-len 8192 --format $fmt
	run plan-8b-$fmt plan --model llama3-8b $h16 --global-batch 64 --seq-len 4096 --format $fmt
	run plan-mixtral-$fmt plan --model mixtral-8x7b $h16 --global-batch 256 --seq-len 4096 --format $fmt
	run plan-gpt3-torchrun-$fmt plan --model gpt3-175b --nodes 8 --gpu A100 --global-batch 1536 --seq-len 2048 --launch torchrun --format $fmt
done
run plan-70b-pins plan --model llama3-70b $h16 --global-batch 512 --seq-len 8192 --tp 8 --pp 4 --schedule 1f1b
run plan-70b-block plan --model llama3-70b $h16 --global-batch 512 --seq-len 8192 --mapping block --format json
run plan-128 plan --model llama3-8b --bandwidth $ex/hetero-128x8-h100.json --nodes 128 --gpu h100 --global-batch 256 --seq-len 4096
run plan-nofit plan --model gpt-1t --nodes 1 --gpu h100 --global-batch 8 --seq-len 2048
for fmt in table json; do
	run est-70b-$fmt estimate --model llama3-70b --nodes 16 --gpu h100 --global-batch 512 --seq-len 8192 --tp 8 --pp 4 --vpp 2 --micro-batch 1 --schedule interleaved --format $fmt
	run est-gpt3-$fmt estimate --model gpt3-175b --nodes 16 --gpu A100 --global-batch 1536 --seq-len 2048 --tp 8 --pp 8 --micro-batch 1 --recompute full --attention unfused --format $fmt
	run est-vzb-$fmt estimate --model llama3-8b --nodes 4 --gpu h100 --global-batch 64 --seq-len 4096 --tp 2 --pp 4 --micro-batch 1 --schedule v-zb --format $fmt
done
if [ "$mode" = check ]; then
	diff -r "$ref" "$out" && echo "golden: identical ($(ls "$out" | wc -l) outputs)"
	rc=$?; rm -rf "$out"; exit $rc
fi
