#!/bin/bash
# plugin_load.sh: the launch latency spank_pipette.so adds to a job step
# when many steps start at once, on the local Slurm cluster
# (tests/integration/slurm-local.sh, 4 nodes x 8 GPUs; needs root).
#
# BENCH_LOAD_STEPS (default 50) steps are started together with
# `srun --overlap` inside one allocation of the 4 nodes, the layout of
# tests/integration/test_plugin_load.sh: every 5th step one task per GPU
# (-N4 --ntasks-per-node=8), the others one task per node
# (-N4 --ntasks-per-node=1).  Each step's wall time is taken from just
# before its srun to its exit.  The same load runs with the plugin loaded
# but not asked for (no --pipette-model) and with --pipette-model
# (llama3-70b, the heterogeneous 8-node example cache), alternating
# BENCH_LOAD_ROUNDS times (default 1), off first; the per-step times of all
# rounds of a kind are pooled.  Prints the median and max per step of each
# and the differences.
#
# Without root, without the built plugin, or when the cluster does not
# start, it prints "skipped: ..." and exits 0 (make bench runs it).  A step
# that fails is an error (exit 1).  Environment: PIPETTE_BUILDDIR, and the
# slurm-local.sh knobs (PIPETTE_SLURM_BASE, SLURM_LOCAL_CTLD_PORT, ...).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
SL=$SRC/tests/integration/slurm-local.sh
PLUGIN=${PIPETTE_BUILDDIR:-.}/plugin/.libs/spank_pipette.so
STEPS=${BENCH_LOAD_STEPS:-50}
ROUNDS=${BENCH_LOAD_ROUNDS:-1}
N=4
G=8

if [ "$(id -u)" != 0 ]; then
    echo "plugin_load: skipped: needs root for the local Slurm"
    exit 0
fi
if [ ! -f "$PLUGIN" ]; then
    echo "plugin_load: skipped: $PLUGIN is not built (run make)"
    exit 0
fi
started=0
private=0
if [ -z "${PIPETTE_SLURM_BASE:-}" ]; then
    # A cluster of its own, as tests/integration/run.sh does: never one that
    # another checkout's tests are using.
    eval "$(SLURM_LOCAL_NODES=$N bash "$SL" private)" || exit 1
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
cleanup() {
    rm -f "$CONF"; rm -rf "$TMP"
    if [ "$private" = 1 ]; then bash "$SL" clean >/dev/null
    elif [ "$started" = 1 ]; then bash "$SL" stop >/dev/null; fi
}
trap cleanup EXIT
mkdir -p "$SLURM_LOCAL_PLUGSTACK_DIR"
printf 'required %s gpu=H100 bandwidth=%s\n' "$PLUGIN" "$SRC/etc/examples/hetero-8x8-h100.json" > "$CONF"

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
    # shellcheck disable=SC2086
    if ! timeout 600 ${SLURM_LOCAL_EXEC:-} salloc -N$N --ntasks-per-node=$G --gpus-per-node=$G \
        bash "$f" >"$TMP/salloc.out" 2>&1; then
        echo "plugin_load: salloc failed:" >&2; tail -n 5 "$TMP/salloc.out" >&2; exit 1
    fi
    if [ "$(awk '$2 == 0' "$TMP/times" | grep -c .)" != "$STEPS" ]; then
        echo "plugin_load: $kind: some of the $STEPS steps failed:" >&2
        awk '$2 != 0 { print $1 }' "$TMP/times" | head -n 3 | while read -r i; do
            head -n 3 "$TMP/step.$i.err" >&2
        done
        exit 1
    fi
    awk '{ printf "%.4f\n", $4 - $3 }' "$TMP/times" >> "$TMP/$kind.times"
}
# stats FILE: "median max" of the numbers in FILE.
stats() {
    sort -g "$1" | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.3f %.3f\n", m, v[NR] }'
}

for ((r = 0; r < ROUNDS; r++)); do
    load off
    load on --pipette-model=llama3-70b --pipette-global-batch=256 --pipette-seq-len=4096
done
read -r med_off max_off < <(stats "$TMP/off.times")
read -r med_on max_on < <(stats "$TMP/on.times")
printf 'plugin launch under load, %d concurrent steps on 4 nodes x 8 GPUs (1 in 5 one task per GPU, the rest one per node; llama3-70b, hetero cache), %d round(s), per step: without pipette median %.3f s max %.3f s, with pipette median %.3f s max %.3f s; added: median %.3f s, max %.3f s\n' \
    "$STEPS" "$ROUNDS" "$med_off" "$max_off" "$med_on" "$max_on" \
    "$(awk -v a="$med_on" -v b="$med_off" 'BEGIN { print a - b }')" \
    "$(awk -v a="$max_on" -v b="$max_off" 'BEGIN { print a - b }')"
