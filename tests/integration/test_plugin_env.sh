#!/bin/bash
# test_plugin_env.sh: spank_pipette's environment contract on the 4-node
# cluster: srun mode (one task per GPU) and torchrun mode (one task per
# node), a heterogeneous bandwidth cache changing the mapping the tasks
# receive, the plugin agreeing with `pipette plan`, MASTER_PORT rules and
# srun --export=NONE.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
UNIFORM=$SRC/etc/examples/uniform-4x8-h100.json
HETERO=$SRC/etc/examples/hetero-8x8-h100.json
pipette_on() { plugstack_set pipette "required $PLUGIN gpu=H100 $*"; }
trap 'plugstack_rm pipette; rm -rf "$T_TMP"' EXIT

N=$T_NODES
G=$T_GPUS
NT=$((N * G))
REQ=(--pipette-model=llama3-70b --pipette-global-batch=256 --pipette-seq-len=4096)
PIPETTE_VARS="TP PP DP CP EP VPP MICRO_BATCH GLOBAL_BATCH SCHEDULE RECOMPUTE PRECISION SEQUENCE_PARALLEL DISTRIBUTED_OPTIMIZER DP_SHARD DP_REPLICATE MEGATRON_ARGS PREDICTED_ITER_S PREDICTED_MEM_GIB MAPPING_GAIN PLAN_HASH STACK LAUNCH_ARGS"
# One line per task: Slurm's view, then the plugin's variables.
TASK_LINE='echo "$SLURMD_NODENAME $SLURM_NODEID $SLURM_LOCALID $SLURM_PROCID ${RANK-unset} ${LOCAL_RANK-unset} ${WORLD_SIZE-unset} ${LOCAL_WORLD_SIZE-unset} ${NODE_RANK-unset} ${MASTER_ADDR-unset} ${MASTER_PORT-unset} ${CUDA_VISIBLE_DEVICES-unset} ${SLURM_STEP_GPUS-unset}"'
JOB_LINE='for v in '"$PIPETTE_VARS"'; do eval "printf \"%s=%s;\" $v \"\${PIPETTE_$v-unset}\""; done; echo'

# not_permutation: print the TASK_LINE lines whose CUDA_VISIBLE_DEVICES
# (field 12) is not a permutation of SLURM_STEP_GPUS (field 13).
not_permutation() {
    awk '{ n = split($12, a, ","); m = split($13, b, ","); ok = (n == m && n > 0)
           delete c
           for (i = 1; i <= n; i++) c[a[i]]++
           for (i = 1; i <= m; i++) c[b[i]]--
           for (k in c) if (c[k] != 0) ok = 0
           if (!ok) print }'
}
# The check must be able to fail.
if [ -n "$(echo 'n 0 0 0 0 0 8 8 u n 1 0,1,1 0,1,2' | not_permutation)" ] &&
   [ -z "$(echo 'n 0 0 0 0 0 8 8 u n 1 2,0,1 0,1,2' | not_permutation)" ]; then
    pass "not_permutation tells 0,1,1 from a permutation of 0,1,2"
else
    fail "not_permutation tells 0,1,1 from a permutation of 0,1,2"
fi

# check_srun_mode NAME: OUT holds TASK_LINE lines of an N x G step.
check_srun_mode() {
    local name=$1 lines bad
    lines=$(sort -k5,5n <<<"$OUT")
    assert_eq "$NT" "$(grep -c . <<<"$lines")" "$name: $NT tasks"
    assert_eq "$(seq 0 $((NT - 1)))" "$(awk '{print $5}' <<<"$lines")" "$name: RANK 0..$((NT - 1)) exactly once"
    assert_eq "$NT $G" "$(awk '{print $7, $8}' <<<"$lines" | sort -u)" "$name: WORLD_SIZE=$NT, LOCAL_WORLD_SIZE=$G everywhere"
    bad=$(awk '{print $1, $6}' <<<"$lines" | sort | uniq -d)
    assert_eq "" "$bad" "$name: LOCAL_RANK distinct on each node"
    assert_eq "" "$(awk -v g="$G" '$6 < 0 || $6 >= g' <<<"$lines")" "$name: LOCAL_RANK in 0..$((G - 1))"
    # CUDA_VISIBLE_DEVICES is a permutation of Slurm's list ...
    bad=$(not_permutation <<<"$lines")
    assert_eq "" "$bad" "$name: CUDA_VISIBLE_DEVICES is a permutation of SLURM_STEP_GPUS"
    # ... and the GPU at index LOCAL_RANK is a different one for each task of a node.
    bad=$(awk '{ split($12, a, ","); print $1, a[$6 + 1] }' <<<"$lines" | sort | uniq -d)
    assert_eq "" "$bad" "$name: each task's planned GPU (index LOCAL_RANK) is used once per node"
    local r0
    r0=$(awk '$5 == 0 {print $1}' <<<"$lines")
    assert_eq "$r0" "$(awk '{print $10}' <<<"$lines" | sort -u)" "$name: MASTER_ADDR is rank 0's node ($r0) for every task"
    assert_eq 1 "$(awk '{print $11}' <<<"$lines" | sort -u | grep -c .)" "$name: one MASTER_PORT for the step"
    assert_match '^6[1-5][0-9]{3}$' "$(awk 'NR == 1 {print $11}' <<<"$lines")" "$name: MASTER_PORT in the default range 61000-65535"
    assert_eq "unset" "$(awk '{print $9}' <<<"$lines" | sort -u)" "$name: no NODE_RANK in srun mode"
}

# --- srun mode, uniform links ---------------------------------------------
pipette_on "bandwidth=$UNIFORM"
srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${REQ[@]}" bash -c "$TASK_LINE"
assert_rc 0 "srun mode: step exits 0"
check_srun_mode "srun mode (uniform)"
uniform_map=$(awk '{print $1, $3, $5, $12}' <<<"$OUT" | sort)

srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${REQ[@]}" bash -c "$JOB_LINE"
assert_rc 0 "srun mode: job variables step exits 0"
assert_eq 1 "$(sort -u <<<"$OUT" | grep -c .)" "every task has the same PIPETTE_* values"
assert_no_match 'unset' "$OUT" "all 17 PIPETTE_* variables are set"
plugin_vars=$(head -n1 <<<"$OUT" | tr ';' '\n' | grep . | sed 's/^/PIPETTE_/')
cli_vars=$("$PIPETTE_BUILDDIR/pipette" plan --model llama3-70b --global-batch 256 --seq-len 4096 \
    --nodes "node[1-$N]" --gpu H100 --bandwidth "$UNIFORM" --format env | tr -d "'" | grep '^PIPETTE_')
assert_eq "$cli_vars" "$plugin_vars" "the plugin's PIPETTE_* equal 'pipette plan --format env' for the same inputs"
srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${REQ[@]}" --pipette-bandwidth="$UNIFORM" \
    bash -c 'echo "$PIPETTE_TP ${CUDA_DEVICE_MAX_CONNECTIONS-unset}"'
assert_eq "4 1" "$(sort -u <<<"$OUT")" "TP 4 on Megatron: every task has CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron asserts it)"

# --- srun mode, heterogeneous links: the mapping changes -----------------
srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${REQ[@]}" --pipette-bandwidth="$HETERO" bash -c "$TASK_LINE"
assert_rc 0 "srun mode (hetero): step exits 0"
check_srun_mode "srun mode (hetero)"
hetero_map=$(awk '{print $1, $3, $5, $12}' <<<"$OUT" | sort)
assert_ne "$uniform_map" "$hetero_map" "a heterogeneous cache changes the (node, task) -> (RANK, GPUs) mapping"
# Rank 0 runs where 'pipette plan' puts it.  (node1's links are slower,
# but moving it off gains under 0.5%, where the mapping's exact search
# stops by design: it stays.)
cli_rank0=$("$PIPETTE_BUILDDIR/pipette" plan --model llama3-70b --global-batch 256 --seq-len 4096 \
    --nodes "node[1-$N]" --gpu H100 --bandwidth "$HETERO" --format json |
    awk -F'"' '/"rank":0,/ { getline; print $4; exit }')
assert_match '^node[0-9]+$' "$cli_rank0" "hetero-8x8: 'pipette plan' names rank 0's node"
assert_eq "$cli_rank0" "$(awk '$5 == 0 {print $1}' <<<"$OUT")" "hetero-8x8: rank 0 runs on the node 'pipette plan' gives it"
cli_gain=$("$PIPETTE_BUILDDIR/pipette" plan --model llama3-70b --global-batch 256 --seq-len 4096 \
    --nodes "node[1-$N]" --gpu H100 --bandwidth "$HETERO" --format env | sed -n "s/^PIPETTE_MAPPING_GAIN='\(.*\)'/\1/p")
srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${REQ[@]}" --pipette-bandwidth="$HETERO" bash -c 'echo $PIPETTE_MAPPING_GAIN'
assert_eq "$cli_gain" "$(sort -u <<<"$OUT")" "hetero: PIPETTE_MAPPING_GAIN as 'pipette plan' predicts ($cli_gain)"

# --- --pipette-mapping=block keeps Slurm's order --------------------------
srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${REQ[@]}" --pipette-bandwidth="$HETERO" \
    --pipette-mapping=block bash -c "$TASK_LINE"
assert_rc 0 "mapping=block: step exits 0"
check_srun_mode "mapping=block"
assert_eq "" "$(awk '$4 != $5 || $12 != $13 || $3 != $6' <<<"$OUT")" \
    "mapping=block: RANK = SLURM_PROCID, LOCAL_RANK = SLURM_LOCALID, GPUs in Slurm's order"

# --- torchrun mode: one task per node ---------------------------------------
srun_t -N"$N" --ntasks-per-node=1 --gpus-per-node="$G" "${REQ[@]}" --pipette-bandwidth="$HETERO" bash -c "$TASK_LINE"
assert_rc 0 "torchrun mode: step exits 0"
lines=$(sort -k9,9n <<<"$OUT")
assert_eq "$(seq 0 $((N - 1)))" "$(awk '{print $9}' <<<"$lines")" "torchrun mode: NODE_RANK 0..$((N - 1)) exactly once"
assert_eq "$NT" "$(awk '{print $7}' <<<"$lines" | sort -u)" "torchrun mode: WORLD_SIZE=$NT (GPUs, not tasks)"
assert_eq "unset unset" "$(awk '{print $5, $6}' <<<"$lines" | sort -u)" "torchrun mode: no RANK/LOCAL_RANK (torchrun sets them)"
bad=$(not_permutation <<<"$lines")
assert_eq "" "$bad" "torchrun mode: CUDA_VISIBLE_DEVICES is a permutation of SLURM_STEP_GPUS"
assert_eq "$(awk '$9 == 0 {print $1}' <<<"$lines")" "$(awk '{print $10}' <<<"$lines" | sort -u)" \
    "torchrun mode: MASTER_ADDR is NODE_RANK 0's node"
assert_eq "$(awk '$3 == 0 {print $1}' <<<"$hetero_map")" "$(awk '$9 == 0 {print $1}' <<<"$lines")" \
    "torchrun and srun mode put rank 0 on the same node"
# What torchrun itself reads (PET_* option defaults, static rendezvous): the
# planned node order must reach its node ranks, so node k runs global ranks
# k*G..k*G+G-1 as in the srun-mode plan on the same links.
srun_t -N"$N" --ntasks-per-node=1 --gpus-per-node="$G" "${REQ[@]}" --pipette-bandwidth="$HETERO" \
    bash -c 'echo "$SLURMD_NODENAME ${PET_NODE_RANK-unset} ${NODE_RANK-unset} ${PET_NNODES-unset} ${PET_NPROC_PER_NODE-unset} ${PET_MASTER_ADDR-unset} ${MASTER_ADDR-unset} ${PET_MASTER_PORT-unset} ${MASTER_PORT-unset} ${PET_RDZV_BACKEND-unset}"'
assert_rc 0 "torchrun mode: PET_* step exits 0"
pet=$(sort -k2,2n <<<"$OUT")
assert_eq "" "$(awk '$2 != $3 || $6 != $7 || $8 != $9' <<<"$pet")" \
    "torchrun mode: PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT equal NODE_RANK, MASTER_ADDR, MASTER_PORT"
assert_eq "$N $G static" "$(awk '{print $4, $5, $10}' <<<"$pet" | sort -u)" \
    "torchrun mode: PET_NNODES=$N PET_NPROC_PER_NODE=$G PET_RDZV_BACKEND=static"
planned=$(awk -v g="$G" '$3 % g == 0 {print $3 / g, $1}' <<<"$hetero_map" | sort -n | awk '{print $2}')
assert_eq "$planned" "$(awk '{print $1}' <<<"$pet")" \
    "torchrun mode: the planned node order reaches torchrun's node ranks ($(tr '\n' ' ' <<<"$planned"))"

# --- MASTER_PORT: site range, derived from job and step, user's wins ------
pipette_on "bandwidth=$UNIFORM master_port=30000 port_range=10"
srun_t -N2 --ntasks-per-node="$G" --gpus-per-node="$G" "${REQ[@]/llama3-70b/llama3-8b}" bash -c 'echo $MASTER_PORT $SLURM_JOB_ID $SLURM_STEP_ID'
assert_rc 0 "master_port=30000 port_range=10: step exits 0"
read -r port job step <<<"$(sort -u <<<"$OUT")"
assert_eq "$((30000 + (job + 1009 * step) % 10))" "$port" "MASTER_PORT = 30000 + (job + 1009*step) mod 10"
export MASTER_PORT=29555
srun_t -N2 --ntasks-per-node="$G" --gpus-per-node="$G" "${REQ[@]/llama3-70b/llama3-8b}" bash -c 'echo $MASTER_PORT'
assert_eq "29555" "$(sort -u <<<"$OUT")" "a MASTER_PORT the user set is never replaced"
srun_t -N2 --ntasks-per-node=1 --gpus-per-node="$G" "${REQ[@]/llama3-70b/llama3-8b}" bash -c 'echo $MASTER_PORT $PET_MASTER_PORT'
unset MASTER_PORT
assert_eq "29555 29555" "$(sort -u <<<"$OUT")" "torchrun mode: the user's MASTER_PORT is torchrun's PET_MASTER_PORT too"

# --- srun --export=NONE: the plan does not travel through srun's env ------
pipette_on "bandwidth=$UNIFORM"
srun_t --export=NONE -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${REQ[@]}" /bin/bash -c "$TASK_LINE"
assert_rc 0 "--export=NONE: step exits 0"
check_srun_mode "--export=NONE"
assert_eq "$uniform_map" "$(awk '{print $1, $3, $5, $12}' <<<"$OUT" | sort)" "--export=NONE: the same plan as with the full environment"

# --- a mixture-of-experts model through the plugin -----------------------
# Mixtral 8x7B on the 4 x 8 GPUs: every rank once, the expert sizes in the
# environment and in the Megatron arguments, and the plan equal to what
# `pipette plan` prints for the same inputs.
MOE=(--pipette-model=mixtral-8x7b --pipette-global-batch=128 --pipette-seq-len=4096)
srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${MOE[@]}" bash -c "$TASK_LINE"
assert_rc 0 "mixtral-8x7b: step exits 0"
check_srun_mode "mixtral-8x7b"
srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${MOE[@]}" bash -c \
    'echo "$PIPETTE_EP $PIPETTE_TP $PIPETTE_MEGATRON_ARGS"'
assert_rc 0 "mixtral-8x7b: job variables step exits 0"
assert_eq 1 "$(sort -u <<<"$OUT" | grep -c .)" "mixtral-8x7b: every task got the same plan"
read -r moe_ep _ <<<"$(sort -u <<<"$OUT")"
assert_match '^[1-8]$' "$moe_ep" "mixtral-8x7b: PIPETTE_EP is an expert parallel size dividing 8 experts"
assert_match "--expert-model-parallel-size $moe_ep --expert-tensor-parallel-size [0-9]+" \
    "$(sort -u <<<"$OUT")" "mixtral-8x7b: Megatron arguments carry the expert sizes"
plan_args=$("$PIPETTE_BUILDDIR/pipette" plan --model mixtral-8x7b --nodes "node[1-$N]" \
    --gpus-per-node "$G" --gpu H100 --global-batch 128 --seq-len 4096 \
    --bandwidth "$UNIFORM" --format env 2>&1 | sed -n "s/^PIPETTE_MEGATRON_ARGS='\(.*\)'$/\1/p")
assert_eq "$plan_args" "$(sort -u <<<"$OUT" | cut -d' ' -f3-)" \
    "mixtral-8x7b: the plugin's Megatron arguments equal pipette plan's"

finish
