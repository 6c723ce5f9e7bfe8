#!/bin/bash
# test_plugin_load.sh: 50 job steps with --pipette-model running at once in
# one allocation of the 4 nodes (srun --overlap: Slurm 22.05 lets
# overlapping steps share the CPUs and GPUs), each planning on each of its
# nodes at the same time.  Every 5th step is in srun mode (-N4
# --ntasks-per-node=8: one task per GPU, 32 tasks), the others in torchrun
# mode (-N4 --ntasks-per-node=1, 4 tasks), so 480 tasks and 200 slurmstepd
# run together.  Every step must succeed, with every rank (srun mode) or
# node rank (torchrun mode) exactly once, the same plan as every other step
# of its mode (all PIPETTE_* outputs, RANK, LOCAL_RANK, WORLD_SIZE,
# NODE_RANK, MASTER_ADDR, CUDA_VISIBLE_DEVICES on every node), and its own
# MASTER_PORT; the whole salloc is bounded by a timeout.  Prints the steps'
# wall times (median, max); `make bench` runs tests/bench/plugin_load.sh
# for the comparison with pipette off.
#
# PIPETTE_LOAD_STEPS overrides the step count (default 50).
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
HETERO=$SRC/etc/examples/hetero-8x8-h100.json
plugstack_set pipette "required $PLUGIN gpu=H100 bandwidth=$HETERO"
trap 'plugstack_rm pipette; rm -rf "$T_TMP"' EXIT

N=$T_NODES
G=$T_GPUS
STEPS=${PIPETTE_LOAD_STEPS:-50}
BOUND=$((T_TIMEOUT * 4))     # the whole allocation, 50 steps included

# Every output the plan decides, one "NAME=VALUE" per field, sorted; and
# the node and local task id to key it by.  MASTER_PORT is printed apart.
VARS='^(PIPETTE_(TP|PP|DP|CP|EP|VPP|MICRO_BATCH|GLOBAL_BATCH|SCHEDULE|RECOMPUTE|SEQUENCE_PARALLEL|DISTRIBUTED_OPTIMIZER|MEGATRON_ARGS|PREDICTED_ITER_S|PREDICTED_MEM_GIB|MAPPING_GAIN)|RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|NODE_RANK|MASTER_ADDR|CUDA_VISIBLE_DEVICES)='
TASK='echo "$SLURMD_NODENAME $SLURM_LOCALID port=${MASTER_PORT-none} $(env | grep -E "'"$VARS"'" | sort | tr "\n" "|")"'

cat > "$T_TMP/steps.sh" <<EOF
#!/bin/bash
for i in \$(seq 1 $STEPS); do
    if [ \$((i % 5)) = 0 ]; then L="-N$N -n$((N * G)) --ntasks-per-node=$G"; else L="-N$N -n$N --ntasks-per-node=1"; fi
    (
        t0=\$EPOCHREALTIME
        timeout $T_TIMEOUT srun --overlap \$L --gpus-per-node=$G \\
            --pipette-model=llama3-70b --pipette-global-batch=256 --pipette-seq-len=4096 \\
            bash -c '$TASK' > "$T_TMP/step.\$i.out" 2> "$T_TMP/step.\$i.err"
        rc=\$?
        echo "\$i \$rc \$t0 \$EPOCHREALTIME" >> "$T_TMP/times"
    ) &
done
wait
EOF
chmod +x "$T_TMP/steps.sh"
t0=$SECONDS
slurm --timeout "$BOUND" salloc -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "$T_TMP/steps.sh"
assert_rc 0 "salloc with $STEPS concurrent steps exits 0 within ${BOUND} s"
echo "       ($STEPS concurrent steps in $((SECONDS - t0)) s)"

assert_eq "$STEPS" "$(awk '$2 == 0' "$T_TMP/times" 2>/dev/null | grep -c .)" "$STEPS steps exit 0"
ref_srun="" ref_torch="" ports="" bad=0
for i in $(seq 1 "$STEPS"); do
    out=$(cat "$T_TMP/step.$i.out" 2>/dev/null || true)
    # All of a failed step's stderr, so that a failure on a loaded CI
    # machine can be read from the log alone.
    err=$(head -n 40 "$T_TMP/step.$i.err" 2>/dev/null || true)
    if [ $((i % 5)) = 0 ]; then
        ids=$(grep -o '|RANK=[0-9]*|' <<<"$out" | tr -dc '0-9\n' | sort -n)
        want=$(seq 0 $((N * G - 1)))
    else
        ids=$(grep -o '|NODE_RANK=[0-9]*|' <<<"$out" | tr -dc '0-9\n' | sort -n)
        want=$(seq 0 $((N - 1)))
    fi
    if [ "$ids" != "$want" ]; then
        bad=$((bad + 1))
        fail "step $i: each $( [ $((i % 5)) = 0 ] && echo rank || echo node rank) exactly once" "$err"
        continue
    fi
    # shellcheck disable=SC2001  # per line, on many lines
    map=$(sed 's/ port=[^ ]*//' <<<"$out" | sort)
    if [ $((i % 5)) = 0 ]; then
        if [ -z "$ref_srun" ]; then ref_srun=$map; elif [ "$map" != "$ref_srun" ]; then
            bad=$((bad + 1)); fail "step $i: the same plan as the other srun-mode steps" "$(diff <(echo "$ref_srun") <(echo "$map") | head -n 4)"
        fi
    else
        if [ -z "$ref_torch" ]; then ref_torch=$map; elif [ "$map" != "$ref_torch" ]; then
            bad=$((bad + 1)); fail "step $i: the same plan as the other torchrun-mode steps" "$(diff <(echo "$ref_torch") <(echo "$map") | head -n 4)"
        fi
    fi
    p=$(grep -o 'port=[^ ]*' <<<"$out" | sort -u)
    if [ "$(grep -c . <<<"$p")" != 1 ] || [ "$p" = port=none ]; then
        bad=$((bad + 1)); fail "step $i: one MASTER_PORT" "$p"
    fi
    ports="$ports$p"$'\n'
done
assert_eq 0 "$bad" "$STEPS concurrent steps: each rank once, identical plans per launch mode"
if [ "$bad" != 0 ]; then
    # What the daemons said while the steps ran (the MPI plugins' start-up
    # complaints left out: this cluster has no PMIx).
    echo "       (errors in the daemons' logs:)"
    grep -h -i 'error\|timed out\|refused' "$PIPETTE_SLURM_BASE"/log/*.log 2>/dev/null |
        grep -v -i 'pmix\|state save\|job_state\|resv_state\|node_state' | tail -n 40 | sed 's/^/       /'
fi
assert_eq "$STEPS" "$(grep . <<<"$ports" | sort -u | grep -c .)" "$STEPS concurrent steps: $STEPS distinct MASTER_PORTs"
# The plan is pipette's, not a default, and both modes agree on the
# configuration.
assert_match "PIPETTE_TP=[0-9]+\|" "$ref_torch" "torchrun-mode steps carry a plan"
assert_eq "$(grep -o 'PIPETTE_[A-Z_]*=[^|]*' <<<"$ref_torch" | grep -v MAPPING_GAIN | sort -u)" \
    "$(grep -o 'PIPETTE_[A-Z_]*=[^|]*' <<<"$ref_srun" | grep -v MAPPING_GAIN | sort -u)" \
    "srun and torchrun mode steps pick the same configuration"

if [ -s "$T_TMP/times" ]; then
    read -r med max < <(awk '{ print $4 - $3 }' "$T_TMP/times" | sort -g |
        awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f\n", m, v[NR] }')
    echo "       (step wall time under load, pipette on: median $med s, max $max s)"
fi
finish
