#!/bin/bash
# test_cluster.sh: the harness itself works. The fake cluster has
# $T_NODES nodes with $T_GPUS GPUs each (run.sh: 4 x 8), and Slurm hands out
# the fake GPUs as it would on a real node.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

N=$T_NODES
G=$T_GPUS
NT=$((N * G))
ALL_GPUS=$(seq -s, 0 $((G - 1)))       # "0,1,...,G-1"

# --- the nodes are up, idle, and each has G GPUs -------------------------
slurm sinfo -h -N -o '%N %T %G'
want=$(for ((i = 1; i <= N; i++)); do echo "node$i idle gpu:$G"; done)
assert_eq "$want" "$(sort -V <<<"$OUT")" "sinfo: $N nodes idle with gpu:$G"

# --- node names resolve (MASTER_ADDR=node1 must work) --------------------
assert_match '^[0-9.]+ +node1$' "$(getent hosts node1 | head -n 1 | tr -s ' ')" "node1 resolves through /etc/hosts"

# --- netns mode: every node is its own UTS namespace ---------------------
if [ "${SLURM_LOCAL_MODE:-loopback}" = netns ]; then
    srun_t -N"$N" --ntasks-per-node=1 bash -c 'echo "$SLURMD_NODENAME $(uname -n)"'
    want=$(for ((i = 1; i <= N; i++)); do echo "node$i node$i"; done)
    assert_eq "$want" "$(sort -V <<<"$OUT")" "netns: each task's hostname is its Slurm node name"
fi

# --- srun over all nodes and GPUs ----------------------------------------
srun_t -N"$N" -n"$NT" --gpus-per-node="$G" bash -c \
    'echo "$SLURM_PROCID $SLURMD_NODENAME $SLURM_NODEID $SLURM_LOCALID ${CUDA_VISIBLE_DEVICES-unset} ${SLURM_STEP_GPUS-unset} ${SLURM_GPUS_ON_NODE-unset}"'
assert_rc 0 "srun -N$N -n$NT --gpus-per-node=$G exits 0"
lines=$(sort -n <<<"$OUT")
assert_eq "$(seq 0 $((NT - 1)))" "$(cut -d' ' -f1 <<<"$lines")" "every SLURM_PROCID 0..$((NT - 1)) exactly once"
assert_eq "$NT" "$(grep -c " $ALL_GPUS $ALL_GPUS $G\$" <<<"$lines")" \
    "every task sees CUDA_VISIBLE_DEVICES=SLURM_STEP_GPUS=$ALL_GPUS, SLURM_GPUS_ON_NODE=$G"
want=$(for ((i = 1; i <= N; i++)); do echo "$G node$i"; done)
assert_eq "$want" "$(cut -d' ' -f2 <<<"$lines" | sort -V | uniq -c | awk '{print $1, $2}')" \
    "$G tasks on each of the $N nodes"
# Block distribution: rank r is on node r/G with local id r%G, and
# SLURM_NODEID matches the node name's position in the step.
bad=$(awk -v g="$G" '{ if ($2 != "node" (int($1 / g) + 1) || $3 != int($1 / g) || $4 != $1 % g) print }' <<<"$lines")
assert_eq "" "$bad" "block distribution: rank r on node r/$G, SLURM_NODEID and SLURM_LOCALID agree"

# --- one GPU per task ----------------------------------------------------
srun_t -N"$N" -n"$NT" --gpus-per-task=1 bash -c 'echo "$SLURMD_NODENAME ${CUDA_VISIBLE_DEVICES-unset}"'
assert_rc 0 "srun --gpus-per-task=1 exits 0"
assert_eq "$NT" "$(grep -cE '^node[0-9]+ [0-9]+$' <<<"$OUT")" "--gpus-per-task=1: every task has exactly one GPU index"
want=$(for ((i = 1; i <= N; i++)); do for ((g = 0; g < G; g++)); do echo "node$i $g"; done; done)
assert_eq "$want" "$(sort -V <<<"$OUT")" "--gpus-per-task=1: each GPU of each node used exactly once"

# --- no GPU request: no CUDA_VISIBLE_DEVICES -----------------------------
srun_t -N1 -n1 bash -c 'echo "${CUDA_VISIBLE_DEVICES-unset}"'
assert_eq "unset" "$OUT" "no GPU request: CUDA_VISIBLE_DEVICES unset"

# --- a failing task fails srun (the harness can see failures) ------------
srun_t -N1 -n1 false
assert_ne 0 "$RC" "srun of a failing task exits non-zero"

# --- sbatch, polled with squeue ------------------------------------------
cat > "$T_TMP/job.sh" <<'EOF'
#!/bin/bash
echo "batch JOB_GPUS=${SLURM_JOB_GPUS-unset} NODELIST=$SLURM_JOB_NODELIST NNODES=$SLURM_JOB_NUM_NODES"
srun bash -c 'echo "step $SLURM_PROCID $SLURMD_NODENAME ${CUDA_VISIBLE_DEVICES-unset}"'
EOF
NB=$((N >= 2 ? 2 : 1))
sbatch_t --parsable -N"$NB" --ntasks-per-node="$G" --gpus-per-node="$G" \
    -o "$T_TMP/job.out" "$T_TMP/job.sh"
assert_rc 0 "sbatch exits 0"
job=${OUT%%;*}
assert_match '^[0-9]+$' "$job" "sbatch --parsable prints a job id"
if wait_job "$job"; then pass "sbatch job $job COMPLETED"; else fail "sbatch job $job ended $JOB_STATE" "$(cat "$T_TMP/job.out" 2>/dev/null)"; fi
out=$(cat "$T_TMP/job.out" 2>/dev/null || true)
if [ "$NB" -eq 1 ]; then nl=node1; else nl="node[1-$NB]"; fi
assert_eq "batch JOB_GPUS=$ALL_GPUS NODELIST=$nl NNODES=$NB" "$(grep '^batch ' <<<"$out")" \
    "batch script sees SLURM_JOB_GPUS and the node list"
assert_eq "$(seq 0 $((NB * G - 1)))" "$(grep '^step ' <<<"$out" | awk '{print $2}' | sort -n)" \
    "srun inside sbatch: ranks 0..$((NB * G - 1)) exactly once"
assert_eq "$((NB * G))" "$(grep -c "^step [0-9]* node[0-9]* $ALL_GPUS\$" <<<"$out")" \
    "srun inside sbatch inherits the GPUs"

finish
