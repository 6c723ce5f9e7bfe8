#!/bin/bash
# test_plugin_errors.sh: spank_pipette's failure semantics.  A job that
# asked for pipette with bad inputs fails at launch, before any task runs,
# with one "pipette:" line saying what and how to fix it (unless the site
# says fallback=block); a job that did not ask is untouched; hostile option
# values are refused at submission.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
UNIFORM=$SRC/etc/examples/uniform-4x8-h100.json
BW=$SRC/tests/data/bw
pipette_on() { plugstack_set pipette "required $PLUGIN gpu=H100 $*"; }
trap 'plugstack_rm pipette; rm -rf "$T_TMP"' EXIT

N=$T_NODES
G=$T_GPUS
S4=(-N"$N" --ntasks-per-node="$G" --gpus-per-node="$G")
M8=(--pipette-model=llama3-8b --pipette-global-batch=64)

# launch_fails NAME ERE SRUN-ARGS...: the step fails, no task runs, and
# stderr has one "pipette: NODE:" line per failed node at most (a node
# killed when another node's failure ended the step may say nothing), each
# naming its node and matching ERE.
launch_fails() {
    local name=$1 ere=$2 lines
    shift 2
    srun_t "$@" bash -c 'echo TASK-RAN'
    assert_ne 0 "$RC" "$name: the step fails"
    assert_eq "" "$OUT" "$name: no task ran"
    lines=$(grep 'pipette:' <<<"$ERR")
    assert_ne "" "$lines" "$name: a pipette: line says why"
    assert_eq "$(grep -c . <<<"$lines")" "$(grep -oE 'pipette: node[0-9]+:' <<<"$lines" | sort -u | grep -c .)" \
        "$name: one line per node at most"
    assert_eq "" "$(grep -Ev "pipette: node[0-9]+: .*$ere" <<<"$lines")" \
        "$name: each line names its node and says what is wrong"
}

pipette_on "bandwidth=$UNIFORM"

# --- bad inputs, found on the nodes ------------------------------------------
launch_fails "unknown model" "unknown model 'no-such-model' .*config\.json" \
    "${S4[@]}" --pipette-model=no-such-model --pipette-global-batch=64
launch_fails "unreadable config.json" "cannot open" \
    "${S4[@]}" --pipette-model=/nonexistent/config.json --pipette-global-batch=64 --pipette-seq-len=1024
launch_fails "malformed cache" ".*bad-malformed\.json: .*malformed JSON" \
    "${S4[@]}" "${M8[@]}" --pipette-bandwidth="$BW/bad-malformed.json"
launch_fails "missing cache" "/nonexistent/bw\.json: cannot open" \
    "${S4[@]}" "${M8[@]}" --pipette-bandwidth=/nonexistent/bw.json
launch_fails "node missing from the cache" "node 'node1' is not in the bandwidth cache \(measure it" \
    "${S4[@]}" "${M8[@]}" --pipette-bandwidth="$BW/good-3.json"
launch_fails "no configuration fits" "no configuration fits gpt3-175b on $((N * G)) GPUs.*closest" \
    "${S4[@]}" --pipette-model=gpt3-175b --pipette-global-batch=64 --pipette-seq-len=2048 --pipette-mem-fraction=0.1
launch_fails "impossible pins" "no configuration fits" \
    "${S4[@]}" "${M8[@]}" --pipette-fix=tp=3
launch_fails "layout: 4 tasks on 8 GPUs" "4 tasks per node on 8 GPUs per node: use --ntasks-per-node=8 .* or --ntasks-per-node=1" \
    -N2 --ntasks-per-node=4 --gpus-per-node="$G" "${M8[@]}"
launch_fails "layout: uneven tasks" "different task counts on its nodes" \
    -N2 -n9 --gpus-per-node="$G" "${M8[@]}"
launch_fails "no GPUs" "no GPUs: request them with --gpus-per-node" \
    -N2 --ntasks-per-node=1 "${M8[@]}"
launch_fails "bad PIPETTE_MAPPING input" "PIPETTE_MAPPING.*'sideways': expected optimize or block" \
    --export=ALL,PIPETTE_MAPPING=sideways "${S4[@]}" "${M8[@]}"
launch_fails "model=help in PIPETTE_MODEL" "help lists the models" \
    --export=ALL,PIPETTE_MODEL=help,PIPETTE_GLOBAL_BATCH=8 "${S4[@]}"
pipette_on "bandwidth=$UNIFORM gpu=Z80"
launch_fails "unknown site GPU type" "unknown GPU type 'Z80'" "${S4[@]}" "${M8[@]}"
plugstack_set pipette "required $PLUGIN bandwidth=$UNIFORM"
launch_fails "site without gpu=" "add gpu=TYPE to the pipette line of plugstack.conf" "${S4[@]}" "${M8[@]}"
pipette_on "bandwidth=$UNIFORM"

# --- user-named files are read with the user's rights ----------------------
# user_init runs as the job's user: a root-only cache named by an
# unprivileged user must not be readable through the plugin.
install -m 0600 "$UNIFORM" "$T_TMP/root-only.json"
slurm runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" srun --chdir=/tmp "${S4[@]}" "${M8[@]}" \
    --pipette-bandwidth="$T_TMP/root-only.json" bash -c 'echo TASK-RAN'
assert_ne 0 "$RC" "user nobody naming a root-only cache: the step fails"
assert_match "pipette: .*root-only\.json: cannot open: Permission denied" "$ERR" \
    "... because the plugin reads it as the user (Permission denied)"
slurm runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" srun --chdir=/tmp -N2 --ntasks-per-node="$G" \
    --gpus-per-node="$G" "${M8[@]}" bash -c 'echo $RANK'
assert_eq "$(seq 0 $((2 * G - 1)))" "$(sort -n <<<"$OUT")" "user nobody: a plan as usual (ranks 0..$((2 * G - 1)))"

# --- refused at submission (srun exits before any job step) ----------------
refused() {
    local name=$1 ere=$2
    shift 2
    srun_t "$@" bash -c 'echo TASK-RAN'
    assert_ne 0 "$RC" "$name: srun refuses"
    assert_eq "" "$OUT" "$name: nothing ran"
    assert_match "pipette: $ere" "$ERR" "$name: the message names the problem"
}
refused "no global batch" "--pipette-global-batch=N is required" "${S4[@]}" --pipette-model=llama3-8b
refused "global batch not a number" "--pipette-global-batch: 'abc' is not a number" "${S4[@]}" --pipette-model=llama3-8b --pipette-global-batch=abc
refused "negative sequence length" "--pipette-seq-len: '-5' is not a number" "${S4[@]}" "${M8[@]}" --pipette-seq-len=-5
refused "mem fraction above 1" "--pipette-mem-fraction: 2 is out of range" "${S4[@]}" "${M8[@]}" --pipette-mem-fraction=2
refused "unknown fix knob" "--pipette-fix: unknown knob 'xp'" "${S4[@]}" "${M8[@]}" --pipette-fix=xp=2
refused "fix without value" "--pipette-fix: 'tp': expected knob=value" "${S4[@]}" "${M8[@]}" --pipette-fix=tp
refused "unknown schedule" "--pipette-schedule: schedule 'pipedream'" "${S4[@]}" "${M8[@]}" --pipette-schedule=pipedream
refused "unknown mapping" "--pipette-mapping: 'random': expected optimize or block" "${S4[@]}" "${M8[@]}" --pipette-mapping=random
refused "control character in the model" "--pipette-model: value contains a control character" \
    "${S4[@]}" --pipette-model=$'llama\e[2J' --pipette-global-batch=64
refused "newline in a path" "--pipette-bandwidth: value contains a control character" \
    "${S4[@]}" "${M8[@]}" --pipette-bandwidth=$'/tmp/a\nPIPETTE_TP=99'
refused "absurdly long value" "--pipette-model: value longer than 1023 bytes" \
    "${S4[@]}" --pipette-model="$(printf 'm%.0s' $(seq 1 5000))" --pipette-global-batch=64
refused "bad PIPETTE_SEQ_LEN at submission" ".*PIPETTE_SEQ_LEN.*not a number" \
    --export=ALL,PIPETTE_SEQ_LEN=lots "${S4[@]}" "${M8[@]}"
sbatch_t --pipette-model=llama3-8b --pipette-global-batch=zero --wrap true
assert_ne 0 "$RC" "sbatch refuses a bad option value"
assert_match "pipette: --pipette-global-batch: 'zero' is not a number" "$ERR" "sbatch: the message names the option"

# --- refused by slurmctld after the options passed ---------------------------
# srun hashes the step's inputs in a thread from init_post_opt on; when
# slurmctld then refuses the job, srun exits at once and unloads the plugin,
# so the thread must be done by then (slurm_spank_exit joins it).
# A cache file near the size limit (250 MiB, its tail zeros: it is only
# hashed, the job never starts) keeps the hash running well past the
# refusal.
"$PIPETTE_BUILDDIR/pipette" bandwidth generate --nodes 64 --seed 1 -o "$T_TMP/big.json" 2>/dev/null
truncate -s 250M "$T_TMP/big.json"
for i in 1 2 3; do
    srun_t -p no-such-partition "${S4[@]}" "${M8[@]}" --pipette-bandwidth="$T_TMP/big.json" \
        bash -c 'echo TASK-RAN'
    assert_ne 0 "$RC" "refused by slurmctld ($i): srun fails"
    assert_eq 1 "$((RC < 128))" "refused by slurmctld ($i): srun exits, not killed by a signal (rc $RC)"
    assert_match "[Ii]nvalid partition" "$ERR" "refused by slurmctld ($i): slurmctld's reason"
    assert_no_match "Segmentation|core dumped" "$ERR" "refused by slurmctld ($i): no crash"
done
rm -f "$T_TMP/big.json"

# --- fallback=block: start in Slurm's order with a warning --------------------
pipette_on "bandwidth=$BW/good-3.json fallback=block"
srun_t "${S4[@]}" "${M8[@]}" bash -c 'echo "$SLURM_PROCID ${RANK-unset} ${PIPETTE_TP-unset} ${PIPETTE_MAPPING_GAIN-unset} $CUDA_VISIBLE_DEVICES"'
assert_rc 0 "fallback=block, node missing from the cache: the step runs"
assert_eq 1 "$(grep -c 'pipette: warning: .*not in the bandwidth cache.*fallback=block' <<<"$ERR")" "fallback=block: one warning line"
assert_eq "" "$(awk '$1 != $2 || $4 != "1.0000" || $5 != "0,1,2,3,4,5,6,7"' <<<"$OUT")" \
    "fallback=block: planned on nominal links in Slurm's order (RANK = SLURM_PROCID, gain 1)"
assert_no_match ' unset ' "$OUT" "fallback=block: the PIPETTE_* variables are still set"
srun_t "${S4[@]}" --pipette-model=no-such-model --pipette-global-batch=64 bash -c 'echo "${RANK-unset} ${PIPETTE_TP-unset}"'
assert_rc 0 "fallback=block, unknown model: the step runs"
assert_eq "unset unset" "$(sort -u <<<"$OUT")" "fallback=block without any plan: untouched"
assert_match "pipette: warning: .*unknown model.*starting without a plan" "$ERR" "fallback=block without any plan: warns"

# --- jobs that did not ask are untouched --------------------------------------
pipette_on "bandwidth=$UNIFORM"
# Every task's environment, one "nodeid NAME=VALUE" line per variable,
# without what changes from job to job (ids, ports, pids).
ENVDUMP='env | grep -v -E "^(SLURM_JOB_ID|SLURM_JOBID|SLURM_STEP_ID|SLURM_STEPID|SLURM_TASK_PID|SLURM_SRUN_COMM_PORT|SLURM_STEP_LAUNCHER_PORT|_)=" | sed "s/^/$SLURM_NODEID /"'
# The same two nodes both times: on a loaded machine the scheduler may
# otherwise place the second job elsewhere while the first one's nodes
# are still completing, and the node names differ.
srun_t -N2 -w node1,node2 --ntasks-per-node=1 --gpus-per-node="$G" bash -c "$ENVDUMP"
with_plugin=$(sort <<<"$OUT")
plugstack_rm pipette
srun_t -N2 -w node1,node2 --ntasks-per-node=1 --gpus-per-node="$G" bash -c "$ENVDUMP"
OUT=$(sort <<<"$OUT")
assert_eq "$OUT" "$with_plugin" "a job without --pipette-model: the same environment as without the plugin"
[ "$OUT" = "$with_plugin" ] || diff <(echo "$OUT") <(echo "$with_plugin") | sed 's/^/       /' | head -20
pipette_on "bandwidth=$UNIFORM"
srun_t --export=ALL,PIPETTE_SEQ_LEN=garbage,PIPETTE_FIX=tp=0 "${S4[@]}" bash -c 'echo "${RANK-unset} ${PIPETTE_TP-unset}"'
assert_rc 0 "garbage PIPETTE_* inputs without a model: the job runs"
assert_eq "unset unset" "$(sort -u <<<"$OUT")" "garbage PIPETTE_* inputs without a model: untouched"
srun_t -N1 -n1 bash -c 'echo ${CUDA_VISIBLE_DEVICES-unset}'
assert_eq "unset" "$OUT" "a job without GPUs and without pipette: untouched"

finish
