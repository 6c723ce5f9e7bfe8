#!/bin/bash
# test_sbatch.sh: `pipette plan --format sbatch` writes a batch script that
# runs the plan as submitted, on a cluster without the plugin. For each
# stack (megatron with a measured heterogeneous cache on named nodes, so
# that the mapping permutes GPUs and the script pins --nodelist; nemo,
# megatron-bridge and torchtitan on a count of nodes), the script passes `bash -n`, is
# submitted with sbatch to the local cluster, and starts a fake trainer
# (named with --trainer; torchtitan's goes through a fake torchrun on PATH
# that starts one trainer per GPU as torchrun does) that checks its
# arguments against the plan's job variables and its environment, and
# logs one line per rank. The job must complete, and the ranks must be
# 0..WORLD_SIZE-1 once each, each on a GPU of its own. No GPU is needed:
# the cluster's GPUs are gres entries on character devices.
# shellcheck disable=SC2016  # the fakes' single-quoted bodies expand when they run
. "$(dirname "$0")/lib.sh"

SRC=$(cd "$TESTS_DIR/../.." && pwd)
PIPETTE=${PIPETTE_BUILDDIR:-$SRC}/pipette
if [ ! -x "$PIPETTE" ]; then
    fail "pipette is built ($PIPETTE)"
    finish
fi
HETERO=$SRC/etc/examples/hetero-8x8-h100.json
N=$T_NODES
G=$T_GPUS
W=$((N * G))
BIN=$T_TMP/bin
mkdir -p "$BIN"
# The plugin is not in the plugin stack of these jobs.
plugstack_rm pipette

# The fake trainer: every check it fails is logged and makes it exit 1.
cat >"$BIN/fake-trainer" <<'EOF'
#!/bin/bash
log=$FAKE_LOG/rank.$RANK
bad() { echo "FAIL rank ${RANK:-?} on ${SLURMD_NODENAME:-?}: $*" >>"$FAKE_LOG/fail"; exit 1; }
arg() {  # arg NAME: the value after "NAME" or of "NAME=" in the arguments
    local prev= a
    for a in "${ARGS[@]}"; do
        [ "$prev" = "$1" ] && { echo "$a"; return; }
        case $a in "$1="*) echo "${a#"$1="}"; return ;; esac
        prev=$a
    done
}
ARGS=("$@")
for v in RANK LOCAL_RANK WORLD_SIZE MASTER_ADDR MASTER_PORT CUDA_VISIBLE_DEVICES PIPETTE_TP \
         PIPETTE_PP PIPETTE_PLAN_HASH PIPETTE_STACK; do
    [ -n "${!v:-}" ] || bad "$v is not set"
done
[ "$WORLD_SIZE" = "$((SLURM_NNODES * FAKE_GPUS))" ] || bad "WORLD_SIZE $WORLD_SIZE, not nodes x GPUs"
[ "$RANK" -ge 0 ] && [ "$RANK" -lt "$WORLD_SIZE" ] || bad "RANK $RANK out of range"
[ "$LOCAL_RANK" -ge 0 ] && [ "$LOCAL_RANK" -lt "$FAKE_GPUS" ] || bad "LOCAL_RANK $LOCAL_RANK"
IFS=, read -r -a cvd <<<"$CUDA_VISIBLE_DEVICES"
[ "${#cvd[@]}" = "$FAKE_GPUS" ] || bad "CUDA_VISIBLE_DEVICES $CUDA_VISIBLE_DEVICES"
[ "$(printf '%s\n' "${cvd[@]}" | sort -u | wc -l)" = "$FAKE_GPUS" ] || bad "CUDA_VISIBLE_DEVICES repeats a GPU"
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
case $PIPETTE_STACK in
megatron)
    tp=$(arg --tensor-model-parallel-size) pp=$(arg --pipeline-model-parallel-size)
    cp=$(arg --context-parallel-size)
    want=; if [ "$tp" -gt 1 ] || [ "$cp" -gt 1 ]; then want=1; fi
    [ "${CUDA_DEVICE_MAX_CONNECTIONS:-}" = "$want" ] || bad "CUDA_DEVICE_MAX_CONNECTIONS '${CUDA_DEVICE_MAX_CONNECTIONS:-}' with tp $tp cp $cp"
    ;;
nemo)
    tp=$(arg trainer.strategy.tensor_model_parallel_size)
    pp=$(arg trainer.strategy.pipeline_model_parallel_size)
    [ "${ARGS[0]}" = --factory ] || bad "the recipe factory is not first: ${ARGS[*]}"
    [[ $(arg --factory) == *"(num_nodes=$SLURM_NNODES,num_gpus_per_node=$FAKE_GPUS,"* ]] ||
        bad "--factory $(arg --factory)"
    ;;
megatron-bridge)
    # Megatron-Bridge's run script: the flat recipe's selectors first,
    # then Hydra overrides; CUDA_DEVICE_MAX_CONNECTIONS as the script
    # picks it on H100 (scripts/performance/utils/overrides.py:248-263)
    tp=$(arg model.tensor_model_parallel_size) pp=$(arg model.pipeline_model_parallel_size)
    cp=$(arg model.context_parallel_size)
    [ "${ARGS[0]}" = -m ] || bad "the recipe selector is not first: ${ARGS[*]}"
    [ "$(arg -g)" = h100 ] && [ "$(arg -c)" = bf16 ] || bad "-g $(arg -g) -c $(arg -c)"
    [ "$(arg -ng)" = "$WORLD_SIZE" ] || bad "-ng $(arg -ng), WORLD_SIZE $WORLD_SIZE"
    want=8; if [ "$tp" -gt 1 ] || [ "$cp" -gt 1 ]; then want=1; fi
    [ "${CUDA_DEVICE_MAX_CONNECTIONS:-}" = "$want" ] || bad "CUDA_DEVICE_MAX_CONNECTIONS '${CUDA_DEVICE_MAX_CONNECTIONS:-}' with tp $tp cp $cp"
    ;;
torchtitan)
    tp=$(arg --parallelism.tensor_parallel_degree)
    pp=$(arg --parallelism.pipeline_parallel_degree)
    [ "$TORCHRUN_SEEN" = 1 ] || bad "not started by torchrun"
    ;;
*) bad "stack $PIPETTE_STACK" ;;
esac
[ "$tp" = "$PIPETTE_TP" ] || bad "TP $tp in the arguments, $PIPETTE_TP planned"
[ "$pp" = "$PIPETTE_PP" ] || bad "PP $pp in the arguments, $PIPETTE_PP planned"
echo "$RANK $LOCAL_RANK $WORLD_SIZE $SLURMD_NODENAME ${cvd[$LOCAL_RANK]} $MASTER_ADDR $first $PIPETTE_PLAN_HASH" >"$log"
EOF

# A fake torchrun with the static rendezvous: checks its options, starts
# --nproc-per-node trainers with torchrun's RANK = node_rank x nproc +
# local rank, and fails if one does.
cat >"$BIN/torchrun" <<'EOF'
#!/bin/bash
bad() { echo "FAIL torchrun on ${SLURMD_NODENAME:-?}: $*" >>"$FAKE_LOG/fail"; exit 1; }
while [ $# -gt 0 ]; do
    case $1 in
        --nnodes=*) nnodes=${1#*=} ;; --nproc-per-node=*) nproc=${1#*=} ;;
        --node-rank=*) node_rank=${1#*=} ;; --rdzv-backend=*) rdzv=${1#*=} ;;
        --master-addr=*) addr=${1#*=} ;; --master-port=*) port=${1#*=} ;;
        --*) bad "unknown option $1" ;;
        *) break ;;
    esac
    shift
done
[ "$nnodes" = "$SLURM_NNODES" ] || bad "--nnodes $nnodes"
[ "$nproc" = "$FAKE_GPUS" ] || bad "--nproc-per-node $nproc"
[ "$rdzv" = static ] || bad "--rdzv-backend $rdzv"
[ "$addr" = "$MASTER_ADDR" ] && [ "$port" = "$MASTER_PORT" ] || bad "master $addr:$port"
[ "$node_rank" = "$NODE_RANK" ] || bad "--node-rank $node_rank, NODE_RANK $NODE_RANK"
pids=()
for ((i = 0; i < nproc; i++)); do
    RANK=$((node_rank * nproc + i)) LOCAL_RANK=$i WORLD_SIZE=$((nnodes * nproc)) \
        LOCAL_WORLD_SIZE=$nproc TORCHRUN_SEEN=1 "$@" & pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
EOF
chmod 0755 "$BIN/fake-trainer" "$BIN/torchrun"

# run_script NAME PLAN_ARGS...: write the script, check it, submit it, and
# check what the ranks logged.
run_script() {
    local name=$1 script=$T_TMP/$1.sh lines id
    shift
    export FAKE_LOG=$T_TMP/$name.log FAKE_GPUS=$G PATH=$BIN:$PATH
    mkdir -p "$FAKE_LOG"
    run "$PIPETTE" plan --gpus-per-node "$G" --gpu H100 --trainer "$BIN/fake-trainer" \
        --format sbatch "$@"
    assert_rc 0 "$name: pipette plan --format sbatch exits 0"
    printf '%s\n' "$OUT" >"$script"
    run bash -n "$script"
    assert_rc 0 "$name: the script passes bash -n"
    sbatch_t --parsable -o "$T_TMP/$name.out" -e "$T_TMP/$name.err" "$script"
    assert_rc 0 "$name: sbatch accepts the script as written"
    id=${OUT%%;*}
    if wait_job "$id" 120; then pass "$name: job $id completed"; else
        fail "$name: job $id completed" "state $JOB_STATE" "$(cat "$FAKE_LOG/fail" 2>/dev/null)" \
            "$(tail -n 5 "$T_TMP/$name.err" 2>/dev/null)"
    fi
    assert_eq "" "$(cat "$FAKE_LOG/fail" 2>/dev/null)" "$name: the fake trainer's checks of arguments and environment pass"
    lines=$(cat "$FAKE_LOG"/rank.* 2>/dev/null | sort -n)
    assert_eq "$(seq 0 $((W - 1)))" "$(awk '{print $1}' <<<"$lines")" "$name: ranks 0..$((W - 1)) once each"
    assert_eq "" "$(awk '{print $4, $5}' <<<"$lines" | sort | uniq -d)" "$name: every rank on a GPU of its own"
    assert_eq 1 "$(awk '{print $8}' <<<"$lines" | sort -u | grep -c .)" "$name: one plan hash on every rank"
    SCRIPT=$script LINES=$lines
}

run_script megatron --model llama3-70b --nodes "node[1-$N]" --global-batch 256 --seq-len 4096 \
    --bandwidth "$HETERO"
assert_eq "#SBATCH --nodelist=node[1-$N]" "$(grep '^#SBATCH --nodelist=' "$SCRIPT")" \
    "megatron: a plan of named nodes pins them"
assert_match "exec $BIN/fake-trainer --tensor-model-parallel-size " "$(cat "$SCRIPT")" \
    "megatron: one task per GPU runs the trainer with Megatron-LM's arguments"
# The heterogeneous links move ranks off Slurm's order: the GPU lists are
# permutations, not all the identity.
assert_ne "" "$(grep -E '^node[0-9]+\) order=' "$SCRIPT" | grep -v 'order=0,1,2,3,4,5,6,7 ')" \
    "megatron: the mapping permutes some node's GPUs"
assert_eq "$(awk '$1 == 0 {print $4}' <<<"$LINES")" "$(awk '{print $6}' <<<"$LINES" | sort -u)" \
    "megatron: MASTER_ADDR is rank 0's node on every rank"

# The fake trainer's checks can fail: the same script with another TP in
# the arguments than the plan's fails the job, and says why.
tp=$(sed -n "s/^export PIPETTE_TP='\([0-9]*\)'$/\1/p" "$SCRIPT")
sed "s/--tensor-model-parallel-size $tp /--tensor-model-parallel-size $((tp * 2)) /" "$SCRIPT" \
    >"$T_TMP/wrong-tp.sh"
export FAKE_LOG=$T_TMP/wrong-tp.log
mkdir -p "$FAKE_LOG"
sbatch_t --parsable -o /dev/null -e /dev/null "$T_TMP/wrong-tp.sh"
if wait_job "${OUT%%;*}" 120; then fail "a script whose TP is not the plan's fails its job"; else
    assert_eq FAILED "$JOB_STATE" "a script whose TP is not the plan's fails its job"
fi
assert_match "TP $((tp * 2)) in the arguments, $tp planned" "$(cat "$FAKE_LOG/fail" 2>/dev/null)" \
    "the fake trainer says which argument differs from the plan"

run_script nemo --model llama3-70b --nodes "$N" --global-batch 256 --seq-len 4096 --stack nemo
assert_match "exec $BIN/fake-trainer --factory " "$(cat "$SCRIPT")" \
    "nemo: the trainer gets the recipe factory first"
assert_eq "$(awk '$1 == 0 {print $4}' <<<"$LINES")" "$(awk '{print $6}' <<<"$LINES" | sort -u)" \
    "nemo: MASTER_ADDR is rank 0's node on every rank"

run_script megatron-bridge --model llama3-8b --nodes "$N" --global-batch 128 --seq-len 4096 \
    --stack megatron-bridge
assert_match "exec $BIN/fake-trainer -m llama -mr llama3_8b -g h100 -c bf16 -ng $W " "$(cat "$SCRIPT")" \
    "megatron-bridge: one task per GPU runs the trainer with the run script's recipe selectors"

run_script torchtitan --model llama3-8b --nodes "$N" --global-batch 128 --seq-len 4096 \
    --stack torchtitan
assert_match $'\n#SBATCH --ntasks-per-node=1\n' "$(cat "$SCRIPT")" "torchtitan: one task per node"
assert_match "exec torchrun --nnodes=$N --nproc-per-node=$G " "$(cat "$SCRIPT")" \
    "torchtitan: torchrun on every node"
assert_eq "$(awk '{print $7}' <<<"$LINES" | head -n1)" "$(awk '{print $6}' <<<"$LINES" | sort -u)" \
    "torchtitan: MASTER_ADDR is the job's first node"

# A stack without a launch form is refused, naming it.
run "$PIPETTE" plan --model llama3-8b --nodes 2 --gpu H100 --global-batch 64 --seq-len 4096 \
    --stack composer-fsdp --format sbatch
assert_rc 2 "composer-fsdp: --format sbatch exits 2"
assert_match "composer-fsdp is estimate-only" "$ERR" "composer-fsdp: the refusal names the stack"

finish
