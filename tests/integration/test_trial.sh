#!/bin/bash
# test_trial.sh: `pipette trial` against the real daemons (issue 31).  A
# fake trainer (trial_trainer.sh) runs each plan at its predicted step time
# times a factor the model cannot know, so that the model's first choice
# measures slower than its second; the trial must keep the measured
# fastest, stop a hopeless trial early, stay within its budget, record and
# skip a trial that runs out of memory, one that crashes and one that
# hangs; and the job's next step must apply the winner through the plan
# file, which the plugin refuses for other nodes, another model or stack.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
PIPETTE_BIN=$PIPETTE_BUILDDIR/pipette
TRAINER=$SRC/tests/integration/trial_trainer.sh
G=$T_GPUS
NODES='node[1-2]'
trap 'plugstack_rm pipette; rm -rf "$T_TMP"' EXIT
plugstack_set pipette "required $PLUGIN gpu=H100"
cd "$T_TMP" || exit 1
REQ=(--model llama3-8b --gpu h100 --global-batch 64 --seq-len 2048)
TRIAL=(--warmup 2 --steps 10 --stop-after 3)

# dry_hashes ARGS...: the candidates' plan hashes in the model's order,
# from the dry run (which plans them as the trial will).
dry_hashes() {
    run "$PIPETTE_BIN" trial "${REQ[@]}" --nodes "$NODES" --gpus-per-node "$G" \
        --apply "${APPLY:-plugin}" --logs "$T_TMP/dry" --dry-run "$@" -- true
    sed -n 's/^[0-9]\. predicted .*(plan \([0-9a-f]*\), .*/\1/p' <<<"$OUT"
}
# trial NAME ARGS...: pipette trial inside an allocation of node[1-2].
trial() {
    local name=$1
    shift
    slurm --timeout 120 salloc -N2 -w "$NODES" --gpus-per-node="$G" --ntasks-per-node="$G" \
        "$PIPETTE_BIN" trial "${REQ[@]}" "${TRIAL[@]}" --logs "$T_TMP/$name.d" \
        --out "$T_TMP/$name.json" "$@"
}
field() { grep -m1 "\"$1\":" "$2" | sed 's/.*: *"\{0,1\}//; s/"\{0,1\},\{0,1\}$//'; }

# --- the dry run: what it would run and the budget -----------------------------
run "$PIPETTE_BIN" trial "${REQ[@]}" --nodes "$NODES" --gpus-per-node "$G" --apply plugin \
    --logs "$T_TMP/dry" --k 3 --time 60 --dry-run -- "$TRAINER" megatron x 2048 '{args}'
assert_rc 0 "trial --dry-run runs outside an allocation with --nodes"
assert_match "3 configurations \(--k 3\); 20 steady steps each after 5 warm-up; budget 60 s \(at most 0\.27 GPU-hours on 16 GPUs\)" \
    "$OUT" "... and states the budget it would use"
assert_match "srun --nodes=2 '--nodelist=node\[1-2\]' --ntasks-per-node=8 --gpus-per-node=8 --kill-on-bad-exit=1 --pipette-model=llama3-8b --pipette-global-batch=64 --pipette-seq-len=2048 --pipette-stack=megatron --pipette-plan-file=$T_TMP/dry/plan-[0-9a-f]{16}\.json $TRAINER megatron x 2048 --tensor-model-parallel-size" \
    "$OUT" "... and the srun step of each trial, {args} replaced by the plan's launch arguments"
assert_eq "" "$(ls "$T_TMP/dry"/trial-*.log 2>/dev/null)" "... and starts nothing"
run "$PIPETTE_BIN" trial "${REQ[@]}" --gpus-per-node "$G" --dry-run -- true
assert_rc 2 "trial outside an allocation without --nodes is refused"
assert_match "not inside an allocation \(SLURM_JOB_NODELIST is unset\)" "$ERR" "... saying why"
run "$PIPETTE_BIN" trial "${REQ[@]}" --nodes "$NODES" --top 3 -- true
assert_match "--top is the trial's to choose" "$ERR" "a plan option the trial sets itself is refused"

# --- Megatron: the model's first choice measures slower than its second --------
mapfile -t H < <(dry_hashes --k 3)
assert_eq 3 "${#H[@]}" "three distinct candidates"
printf '%s 1.30\n%s 1.00\n%s 1.80\n' "${H[0]}" "${H[1]}" "${H[2]}" >"$T_TMP/factors"
t0=$SECONDS
trial meg --k 3 --time 60 --record "$T_TMP/store" -- "$TRAINER" megatron "$T_TMP/factors" 2048
took=$((SECONDS - t0))
assert_rc 0 "trial (megatron) finds a winner"
echo "$OUT"
assert_match "winner: trial 2, plan ${H[1]}, written to $T_TMP/meg\.json" "$OUT" \
    "the measured fastest wins (the model's second choice)"
assert_eq "${H[1]}" "$(field plan_hash "$T_TMP/meg.json")" "the plan file is the winner's plan"
assert_match "predicted ranking: 1 2 3"$'\n'"measured ranking:  2 1 3" "$OUT" \
    "the measured ranking beside the predicted one"
assert_match " 3 .*"$'\n'"      stopped, [3-9] steady steps in [0-9.]+ s: stopped after [3-9] steady steps: \+[0-9.]+% over the fastest so far" \
    "$OUT" "the hopeless third trial is stopped early"
assert_match " 1 .*"$'\n'"      measured, 1[0-9] steady steps" "$OUT" "the first trial measured its 10 steps"
w=$(sed -n 's/^the trials took \([0-9.]*\) s of the 60 s budget.*/\1/p' <<<"$OUT")
if awk -v w="$w" 'BEGIN { exit !(w > 0 && w <= 60) }' && [ "$took" -le 75 ]; then
    pass "the trials kept within the budget ($w s of 60)"
else
    fail "the trials kept within the budget" "took $w s (salloc $took s)"
fi
assert_eq 3 "$(find "$T_TMP/store" -maxdepth 1 -name '*.json' | grep -c .)" \
    "each measured trial is an observation in the store"
run "$PIPETTE_BIN" calibrate --from "$T_TMP/store"
assert_rc 0 "... which pipette calibrate reads"

# --- the job's next step applies the winner through the plan file --------------
STEP=(-N2 -w "$NODES" --ntasks-per-node="$G" --gpus-per-node="$G" --pipette-model=llama3-8b
      --pipette-global-batch=64 --pipette-seq-len=2048)
srun_t "${STEP[@]}" --pipette-plan-file="$T_TMP/meg.json" \
    bash -c '[ "$SLURM_PROCID" = 0 ] && echo "$PIPETTE_PLAN_HASH $PIPETTE_TP $PIPETTE_PP $PIPETTE_MICRO_BATCH"; true'
assert_rc 0 "a step with --pipette-plan-file runs"
want="${H[1]} $(field tp "$T_TMP/meg.json") $(field pp "$T_TMP/meg.json") $(field micro_batch "$T_TMP/meg.json")"
assert_eq "$want" "$OUT" "... and applies the winner as is"
slurm env PIPETTE_PLAN_FILE="$T_TMP/meg.json" srun "${STEP[@]}" \
    bash -c '[ "$SLURM_PROCID" = 0 ] && echo "$PIPETTE_PLAN_HASH"; true'
assert_eq "${H[1]}" "$OUT" "PIPETTE_PLAN_FILE in the job's environment applies it too"
srun_t -N1 -w node3 --ntasks-per-node="$G" --gpus-per-node="$G" --pipette-model=llama3-8b \
    --pipette-global-batch=64 --pipette-plan-file="$T_TMP/meg.json" true
assert_ne 0 "$RC" "a plan file made for other nodes is refused"
assert_match "pipette: node3: plan file $T_TMP/meg\.json: cluster\.nodes: made for node1, node2 \(2 nodes\), the step runs on node3 \(1 node\)" \
    "$ERR" "... naming the field"
srun_t "${STEP[@]/llama3-8b/llama3-70b}" --pipette-plan-file="$T_TMP/meg.json" true
assert_match "plan file $T_TMP/meg\.json: model: made for llama3-8b, the step asks for llama3-70b" \
    "$ERR" "a plan file made for another model is refused, naming the field"
srun_t "${STEP[@]}" --pipette-stack=nemo --pipette-plan-file="$T_TMP/meg.json" true
assert_match "plan file $T_TMP/meg\.json: stack: made for megatron, the step runs nemo" \
    "$ERR" "a plan file made for another stack is refused, naming the field"
srun_t "${STEP[@]}" --pipette-plan-file=meg.json true
assert_match "--pipette-plan-file: 'meg\.json': expected an absolute path" "$ERR" \
    "a relative plan file is refused at srun"

# --- without the plugin: the plan's environment, ranks in Slurm's order ----------
APPLY='env'
mapfile -t H < <(dry_hashes --k 2)
printf '%s 1.20\n%s 1.00\n' "${H[0]}" "${H[1]}" >"$T_TMP/factors"
trial env --k 2 --time 60 --apply env -- "$TRAINER" megatron "$T_TMP/factors" 2048
assert_rc 0 "trial --apply env finds a winner"
assert_match "each plan applied as its environment \(ranks in Slurm's order\)" "$OUT" \
    "... applying each plan as its environment"
assert_match "winner: trial 2, plan ${H[1]}" "$OUT" "... and the measured fastest wins"
assert_eq "block" "$(field mode "$T_TMP/env.json")" "... with a plan made for Slurm's order"
unset APPLY

# --- torchtitan's log ------------------------------------------------------------
REQ=(--model llama3-8b --gpu h100 --global-batch 64 --seq-len 2048 --stack torchtitan)
mapfile -t H < <(dry_hashes --k 2)
printf '%s 1.25\n%s 1.00\n' "${H[0]}" "${H[1]}" >"$T_TMP/factors"
trial tt --k 2 --time 60 -- "$TRAINER" torchtitan "$T_TMP/factors" 2048
assert_rc 0 "trial (torchtitan) finds a winner"
echo "$OUT"
assert_match "winner: trial 2, plan ${H[1]}" "$OUT" "torchtitan: the measured fastest wins"

# --- a log past 256 MiB (the whole-file parsers' bound) ----------------------------
# 24 MiB of NCCL lines before each report: the 11th and 12th reports, which
# the trial needs for its 10 steady steps, come after 256 MiB.  The trial
# reads the log as it grows, each byte once (before: it read the whole log
# at each look, and past 256 MiB not at all: the trial "hung").
REQ=(--model llama3-8b --gpu h100 --global-batch 64 --seq-len 2048)
mapfile -t H < <(dry_hashes --k 1)
printf '%s noisy\n' "${H[0]}" >"$T_TMP/factors"
trial noisy --k 1 --time 60 -- "$TRAINER" megatron "$T_TMP/factors" 2048
assert_rc 0 "trial with a log past 256 MiB finds a winner"
assert_match " 1 .*"$'\n'"      measured, 1[0-9] steady steps" "$OUT" "... having measured its 10 steps"
size=$(stat -c %s "$T_TMP"/noisy.d/trial-*.log 2>/dev/null | sort -n | tail -n 1)
if [ "${size:-0}" -gt $((256 << 20)) ]; then pass "... from a log of $((size >> 20)) MiB"
else fail "the trial's log passed 256 MiB" "${size:-no log}"; fi
rm -rf "$T_TMP/noisy.d"

# --- out of memory, a crash and a hang are recorded and skipped --------------------
REQ=(--model llama3-8b --gpu h100 --global-batch 64 --seq-len 2048)
mapfile -t H < <(dry_hashes --k 4)
printf '%s oom\n%s crash\n%s hang\n%s 1.00\n' "${H[0]}" "${H[1]}" "${H[2]}" "${H[3]}" >"$T_TMP/factors"
trial bad --k 4 --time 16 --record "$T_TMP/store2" -- "$TRAINER" megatron "$T_TMP/factors" 2048
assert_rc 0 "trial with failing candidates still finds a winner"
echo "$OUT"
assert_match "winner: trial 4, plan ${H[3]}" "$OUT" "the one trial that ran wins"
assert_match " 1 .*"$'\n'"      out of memory in [0-9.]+ s: out of GPU memory \(exit status 1\); the plan predicted a peak of [0-9.]+ GiB" \
    "$OUT" "the out-of-memory trial is reported against its predicted peak"
assert_match " 2 .*"$'\n'"      crashed in [0-9.]+ s: crashed \(exit status [0-9]+\)" "$OUT" "the crash is reported"
assert_match " 3 .*"$'\n'"      hung in [0-9.]+ s: hung: 0 steady steps within its share of the budget; stopped" \
    "$OUT" "the hang is stopped at its share of the budget"
assert_match "measured ranking:  4  \(failed or not run: 1 2 3\)" "$OUT" "... and all three are skipped"
assert_eq "pipette-oom/1" "$(field schema "$T_TMP/store2/oom/${H[0]}.json")" \
    "the out-of-memory trial is recorded in the store's oom/"
assert_eq 1 "$(find "$T_TMP/store2" -maxdepth 1 -name '*.json' | grep -c .)" \
    "the measured trial is the store's one observation"
w=$(sed -n 's/^the trials took \([0-9.]*\) s of the 16 s budget.*/\1/p' <<<"$OUT")
if awk -v w="$w" 'BEGIN { exit !(w > 0 && w <= 16 + 12) }'; then
    pass "the budget bounds the hang ($w s of 16, and the stop's grace)"
else
    fail "the budget bounds the hang" "took '$w' s"
fi
finish
