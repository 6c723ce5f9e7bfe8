#!/bin/bash
# plugin_launch.sh: the launch time spank_pipette.so adds to a job step, on
# the local Slurm cluster (tests/integration/slurm-local.sh; needs root).
#
#  1. 4 nodes x 8 GPUs, srun mode: the median wall time of
#     `srun -N4 --ntasks-per-node=8 --gpus-per-node=8 true` with and without
#     --pipette-model (plugin loaded in both), over BENCH_RUNS runs each,
#     interleaved so that drift hits both alike.
#  2. 128 emulated nodes: the plugstack argument emulate_nodes=node[1-128]
#     makes slurmstepd plan for those 128 node names (with the 128-node
#     example cache) instead of the step's one node; a step on 1 node with
#     8 tasks then takes the plan for node1's slots.  So one slurmstepd does
#     the whole 1024-GPU search and mapping; on a real cluster every node
#     does the same work in parallel, so this is the added launch time.
#
# Environment: PIPETTE_BUILDDIR (the build tree), BENCH_RUNS (default 11),
# and the slurm-local.sh knobs.  Prints one line per measurement.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
SL=$SRC/tests/integration/slurm-local.sh
PLUGIN=${PIPETTE_BUILDDIR:-.}/plugin/.libs/spank_pipette.so
RUNS=${BENCH_RUNS:-11}
[ "$(id -u)" = 0 ] || { echo "plugin_launch: needs root (it starts Slurm daemons)" >&2; exit 1; }
[ -f "$PLUGIN" ] || { echo "plugin_launch: $PLUGIN not built" >&2; exit 1; }

started=0
if ! bash "$SL" status >/dev/null 2>&1; then
    started=1
    bash "$SL" start >/dev/null || { echo "plugin_launch: the cluster did not start" >&2; exit 1; }
fi
eval "$(bash "$SL" env)"
CONF=$SLURM_LOCAL_PLUGSTACK_DIR/pipette-bench.conf
ERRF=$(mktemp)
cleanup() { rm -f "$CONF" "$ERRF"; [ "$started" = 1 ] && bash "$SL" stop >/dev/null; }
trap cleanup EXIT

# wall SRUN-ARGS...: seconds for one srun (fails loudly).
wall() {
    local t0 t1
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    if ! timeout 120 ${SLURM_LOCAL_EXEC:-} srun "$@" true >/dev/null 2>"$ERRF"; then
        echo "plugin_launch: srun $* failed:" >&2; cat "$ERRF" >&2; exit 1
    fi
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

S4=(-N4 --ntasks-per-node=8 --gpus-per-node=8)
printf 'required %s gpu=H100 bandwidth=%s\n' "$PLUGIN" "$SRC/etc/examples/hetero-8x8-h100.json" > "$CONF"
wall "${S4[@]}" >/dev/null        # warm-up
off=() on=()
for ((i = 0; i < RUNS; i++)); do
    off+=("$(wall "${S4[@]}")")
    on+=("$(wall "${S4[@]}" --pipette-model=llama3-70b --pipette-global-batch=256 --pipette-seq-len=4096)")
done
m_off=$(printf '%s\n' "${off[@]}" | median)
m_on=$(printf '%s\n' "${on[@]}" | median)
printf 'plugin launch, 4 nodes x 8 GPUs (llama3-70b, hetero cache), median of %d: without %.3f s, with %.3f s, added %.3f s per step\n' \
    "$RUNS" "$m_off" "$m_on" "$(awk -v a="$m_on" -v b="$m_off" 'BEGIN { print a - b }')"

printf 'required %s gpu=H100 bandwidth=%s emulate_nodes=node[1-128]\n' "$PLUGIN" \
    "$SRC/etc/examples/hetero-128x8-h100.json" > "$CONF"
S1=(-N1 --ntasks-per-node=8 --gpus-per-node=8)
for model in llama3-70b llama3-405b; do
    on=()
    off=()
    for ((i = 0; i < (RUNS + 1) / 2; i++)); do
        off+=("$(wall "${S1[@]}")")
        on+=("$(wall "${S1[@]}" --pipette-model=$model --pipette-global-batch=1024 --pipette-seq-len=8192)")
    done
    m_off=$(printf '%s\n' "${off[@]}" | median)
    m_on=$(printf '%s\n' "${on[@]}" | median)
    printf 'plugin launch, 128 emulated nodes x 8 GPUs (%s, hetero-128 cache), median of %d: without %.3f s, with %.3f s, added %.3f s per step\n' \
        "$model" "$(((RUNS + 1) / 2))" "$m_off" "$m_on" "$(awk -v a="$m_on" -v b="$m_off" 'BEGIN { print a - b }')"
done
