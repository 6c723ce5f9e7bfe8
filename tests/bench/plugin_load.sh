#!/bin/bash
# plugin_load.sh: the launch latency spank_pipette.so adds to job steps, on
# the local Slurm cluster (tests/integration/slurm-local.sh, 4 nodes x 8
# GPUs; needs root), with the plan cache on (plugstack plan_cache=, a
# fresh root-owned 1777 directory), as a site would run it.
#
#  1. A job's second step (issue 17: <= 50 ms added): in one allocation,
#     a first step plans and stores the plan; then BENCH_SECOND_RUNS
#     (default 11) steps without pipette and as many with the same inputs
#     (which read the plan), interleaved, one task per GPU
#     (-N4 --ntasks-per-node=8), llama3-70b, with a generated 1024-node
#     bandwidth cache (7.7 MiB; its nodes are named node1..node1024, the
#     harness's node1..node4 among them).  Added = median with - median
#     without.  Then the same with the plan of 1024 nodes x 8 GPUs
#     (emulate_nodes=node[1-1024], the benchmark-only plugstack key: one
#     slurmstepd plans for, and caches the text of, all 1024 nodes).
#  2. Under load (issue 17: <= 0.3 s added to the median step):
#     BENCH_LOAD_STEPS (default 50) steps started together with
#     `srun --overlap` inside one allocation of the 4 nodes, the layout of
#     tests/integration/test_plugin_load.sh: every 5th step one task per
#     GPU (-N4 --ntasks-per-node=8), the others one task per node
#     (-N4 --ntasks-per-node=1), llama3-70b with the heterogeneous 8-node
#     example cache.  Each step's wall time is taken from just before its
#     srun to its exit.  The same load runs with the plugin loaded but not
#     asked for (no --pipette-model) and with --pipette-model, in
#     BENCH_LOAD_ROUNDS rounds (default 3; 0 skips this part) in the
#     order off on, on off, off on, ... (so that neither kind always runs
#     right after the other),
#     each run once no slurmstepd of the one before is left; the plan cache
#     is emptied before each run with pipette, so its steps start cold (one
#     of them plans, the others read); the per-step times of all rounds of
#     a kind are pooled, and each run's median is printed too.  One run
#     against one is not enough on the 2-core build machine: the medians
#     of the same kind measured there spread over 2.2 to 3.8 s from run to
#     run (2026-11-24, 200 slurmstepd per run), several times the 0.3 s
#     target, while the plugin's own callbacks took 3-4 ms median per
#     slurmstepd (user_init) and 0.1 ms per task (task_init).
#
# Every figure is printed with the 1-minute load average the machine had
# just before that measurement started: the script first waits (up to
# BENCH_SETTLE_S, default 120 s) for it to fall below 1, since the
# benchmarks before it in `make bench` load the machine.  A figure that
# misses its target makes the script exit 1, but only when that load
# average was below 1; on a busier machine the miss is printed and the
# exit status stays 0 (these are measurements, not timed tests).
#
# Without root, without the built plugin, or when the cluster does not
# start, it prints "skipped: ..." and exits 0 (make bench runs it).  A step
# that fails is an error (exit 1).  Environment: PIPETTE_BUILDDIR, the
# BENCH_* knobs above, and the slurm-local.sh knobs (PIPETTE_SLURM_BASE,
# SLURM_LOCAL_CTLD_PORT, ...).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
SL=$SRC/tests/integration/slurm-local.sh
BUILD=${PIPETTE_BUILDDIR:-.}
PLUGIN=$BUILD/plugin/.libs/spank_pipette.so
STEPS=${BENCH_LOAD_STEPS:-50}
ROUNDS=${BENCH_LOAD_ROUNDS:-3}
RUNS=${BENCH_SECOND_RUNS:-11}
SETTLE=${BENCH_SETTLE_S:-120}
N=4
G=8
# Issue 17's targets, in seconds.
TARGET_LOAD=0.3
TARGET_SECOND=0.050
MODEL=(--pipette-model=llama3-70b --pipette-global-batch=256 --pipette-seq-len=4096)

if [ "$(id -u)" != 0 ]; then
    echo "plugin_load: skipped: needs root for the local Slurm"
    exit 0
fi
if [ ! -f "$PLUGIN" ] || [ ! -x "$BUILD/pipette" ]; then
    echo "plugin_load: skipped: $PLUGIN or $BUILD/pipette is not built (run make)"
    exit 0
fi
started=0
private=0
if [ -z "${PIPETTE_SLURM_BASE:-}" ]; then
    # A cluster of its own, as tests/integration/run.sh does: never one that
    # another checkout's tests are using.
    priv=$(SLURM_LOCAL_NODES=$N bash "$SL" private) || exit 1
    eval "$priv"
    private=1
fi
if ! bash "$SL" status >/dev/null 2>&1; then
    started=1
    if ! SLURM_LOCAL_NODES=$N SLURM_LOCAL_GPUS=$G bash "$SL" start >/dev/null 2>&1; then
        echo "plugin_load: skipped: the local Slurm cluster did not start (tests/integration/slurm-local.sh start)"
        bash "$SL" "$([ "$private" = 1 ] && echo clean || echo stop)" >/dev/null 2>&1
        exit 0
    fi
fi
eval "$(bash "$SL" env)"
CONF=$SLURM_LOCAL_PLUGSTACK_DIR/pipette-bench-load.conf
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pipette-bench-load.XXXXXX")
chmod 0755 "$TMP"
CACHE=$TMP/plans
cleanup() {
    rm -f "$CONF"; rm -rf "$TMP"
    if [ "$private" = 1 ]; then bash "$SL" clean >/dev/null
    elif [ "$started" = 1 ]; then bash "$SL" stop >/dev/null; fi
}
trap cleanup EXIT
mkdir -p "$SLURM_LOCAL_PLUGSTACK_DIR"
missed=0

# plugstack ARGS...: the bench's plugstack line, with the plan cache.
plugstack() {
    printf 'required %s gpu=H100 plan_cache=%s %s\n' "$PLUGIN" "$CACHE" "$*" > "$CONF"
}
# fresh_cache: an empty cache root as the site makes it (root's, 1777).
fresh_cache() {
    rm -rf "$CACHE"
    mkdir -m 1777 "$CACHE"
}
load1() { cut -d' ' -f1 /proc/loadavg; }
# settle: wait up to SETTLE seconds for the 1-minute load average to fall
# below 1; sets LOAD to the value it then has.
settle() {
    local t=$SECONDS
    LOAD=$(load1)
    while awk -v l="$LOAD" 'BEGIN { exit !(l >= 1) }' && [ $((SECONDS - t)) -lt "$SETTLE" ]; do
        sleep 5
        LOAD=$(load1)
    done
}
# verdict ADDED TARGET: VERDICT says met or MISSED; a miss at a load
# average below 1 counts (missed=1).
verdict() {
    if awk -v a="$1" -v t="$2" 'BEGIN { exit !(a <= t) }'; then
        VERDICT="target <= $2 s met"
    elif awk -v l="$LOAD" 'BEGIN { exit !(l < 1) }'; then
        missed=1
        VERDICT="target <= $2 s MISSED"
    else
        VERDICT="target <= $2 s MISSED (load average $LOAD >= 1: not counted)"
    fi
}
# stats FILE: "median max" of the numbers in FILE.
stats() {
    sort -g "$1" | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.4f %.4f\n", m, v[NR] }'
}
# check_steps FILE COUNT WHAT: every line of FILE ("i rc t0 t1") has rc 0.
check_steps() {
    if [ "$(awk '$2 == 0' "$1" | grep -c .)" != "$2" ]; then
        echo "plugin_load: $3: some of the $2 steps failed:" >&2
        awk '$2 != 0 { print $1 }' "$1" | head -n 3 | while read -r i; do
            head -n 3 "$TMP/step.$i.err" >&2
        done
        exit 1
    fi
}
# salloc_run SCRIPT: run SCRIPT in an allocation of the 4 nodes.
salloc_run() {
    # shellcheck disable=SC2086
    if ! timeout 900 ${SLURM_LOCAL_EXEC:-} salloc -N$N --ntasks-per-node=$G --gpus-per-node=$G \
        bash "$1" >"$TMP/salloc.out" 2>&1; then
        echo "plugin_load: salloc failed:" >&2; tail -n 5 "$TMP/salloc.out" >&2; exit 1
    fi
}

# ---- 1. a job's second step ---------------------------------------------
# second NAME: one allocation: a first step with pipette (it plans and
# stores), then RUNS steps without and with, interleaved; prints the line.
second() {
    local name=$1 f=$TMP/second.sh
    rm -f "$TMP/times"
    cat > "$f" <<EOF
#!/bin/bash
step() {
    local i=\$1 t0
    shift
    t0=\$EPOCHREALTIME
    timeout 300 srun -N$N --ntasks-per-node=$G --gpus-per-node=$G "\$@" true > "$TMP/step.\$i.err" 2>&1
    echo "\$i \$? \$t0 \$EPOCHREALTIME" >> "$TMP/times"
}
step first ${MODEL[*]}
for r in \$(seq 1 $RUNS); do
    step off.\$r
    step on.\$r ${MODEL[*]}
done
EOF
    fresh_cache
    salloc_run "$f"
    check_steps "$TMP/times" $((2 * RUNS + 1)) "$name"
    grep '^off\.' "$TMP/times" | awk '{ printf "%.4f\n", $4 - $3 }' > "$TMP/off.s"
    grep '^on\.' "$TMP/times" | awk '{ printf "%.4f\n", $4 - $3 }' > "$TMP/on.s"
    read -r med_off _ < <(stats "$TMP/off.s")
    read -r med_on _ < <(stats "$TMP/on.s")
    first=$(awk '$1 == "first" { printf "%.3f", $4 - $3 }' "$TMP/times")
    if [ "$(find "$CACHE" -name '*.plan' | wc -l)" != 1 ]; then
        echo "plugin_load: $name: expected one plan in the cache, found:" >&2
        find "$CACHE" -ls >&2
        exit 1
    fi
    added=$(awk -v a="$med_on" -v b="$med_off" 'BEGIN { printf "%.4f", a - b }')
    verdict "$added" "$TARGET_SECOND"
    printf 'plugin, a job'\''s second step with the same inputs, %s, median of %d: without pipette %.3f s, with %.3f s; added: %.1f ms (first step %.3f s; load average %s before); %s\n' \
        "$name" "$RUNS" "$med_off" "$med_on" "$(awk -v a="$added" 'BEGIN { print a * 1000 }')" \
        "$first" "$LOAD" "$VERDICT"
}

BW1024=$TMP/bw1024.json
if ! "$BUILD/pipette" bandwidth generate --seed 1024 --nodes 1024 --gpus-per-node 8 \
    --inter-gbps 45 --intra-gbps 405 --slow-links 0.05 --switch-size 16 --cross-factor 0.9 \
    --slow-switch 5:0.6 --degraded-nvlink 77 --prefix node -o "$BW1024" >/dev/null; then
    echo "plugin_load: pipette bandwidth generate failed" >&2
    exit 1
fi
settle
plugstack "bandwidth=$BW1024"
second "4 nodes x 8 GPUs (llama3-70b, generated 1024-node cache of $(du -m "$BW1024" | cut -f1) MiB)"
settle
plugstack "bandwidth=$BW1024 emulate_nodes=node[1-1024]"
second "the plan of 1024 emulated nodes x 8 GPUs (llama3-70b, the same cache)"

# ---- 2. 50 steps at once --------------------------------------------------
# load KIND ARGS...: STEPS concurrent steps with ARGS; appends each step's
# wall time to $TMP/KIND.times; exits 1 if a step fails.
load() {
    local kind=$1 f=$TMP/steps.sh
    shift
    rm -f "$TMP/times"
    cat > "$f" <<EOF
#!/bin/bash
for i in \$(seq 1 $STEPS); do
    if [ \$((i % 5)) = 0 ]; then L="-N$N -n$((N * G)) --ntasks-per-node=$G"; else L="-N$N -n$N --ntasks-per-node=1"; fi
    (
        t0=\$EPOCHREALTIME
        timeout 120 srun --overlap \$L --gpus-per-node=$G $* true > "$TMP/step.\$i.err" 2>&1
        echo "\$i \$? \$t0 \$EPOCHREALTIME" >> "$TMP/times"
    ) &
done
wait
EOF
    quiet
    salloc_run "$f"
    check_steps "$TMP/times" "$STEPS" "$kind"
    awk '{ printf "%.4f\n", $4 - $3 }' "$TMP/times" > "$TMP/run.times"
    cat "$TMP/run.times" >> "$TMP/$kind.times"
    RUNS_OF[$kind]+=" $(stats "$TMP/run.times" | cut -d' ' -f1)"
}
declare -A RUNS_OF=()
# quiet: wait (up to 60 s) until no slurmstepd of the run before is left.
quiet() {
    local t=$SECONDS
    while pgrep -x slurmstepd >/dev/null && [ $((SECONDS - t)) -lt 60 ]; do sleep 0.5; done
}

if [ "$ROUNDS" = 0 ]; then
    echo "plugin launch under load: skipped (BENCH_LOAD_ROUNDS=0)"
    exit "$missed"
fi
settle
plugstack "bandwidth=$SRC/etc/examples/hetero-8x8-h100.json"
for ((r = 0; r < ROUNDS; r++)); do
    if [ $((r % 2)) = 0 ]; then
        load off
        fresh_cache
        load on "${MODEL[@]}"
    else
        fresh_cache
        load on "${MODEL[@]}"
        load off
    fi
done
read -r med_off max_off < <(stats "$TMP/off.times")
read -r med_on max_on < <(stats "$TMP/on.times")
added=$(awk -v a="$med_on" -v b="$med_off" 'BEGIN { printf "%.4f", a - b }')
verdict "$added" "$TARGET_LOAD"
printf 'plugin launch under load, %d concurrent steps on 4 nodes x 8 GPUs (1 in 5 one task per GPU, the rest one per node; llama3-70b, hetero cache; plan cache on, empty at the start), %d round(s), per step: without pipette median %.3f s max %.3f s, with pipette median %.3f s max %.3f s; added: median %.3f s, max %.3f s (medians of the runs: without%s s, with%s s; load average %s before); %s\n' \
    "$STEPS" "$ROUNDS" "$med_off" "$max_off" "$med_on" "$max_on" "$added" \
    "$(awk -v a="$max_on" -v b="$max_off" 'BEGIN { print a - b }')" "${RUNS_OF[off]}" \
    "${RUNS_OF[on]}" "$LOAD" "$VERDICT"
exit "$missed"
