#!/bin/bash
# test_observe.sh: the site's loop against the real daemons (issue 18):
# jobs with --pipette-model over configurations that mix computation and
# communication differently; node 0 writes the plan it applied
# (plugstack plan_dir=, PIPETTE_PLAN_FILE); rank 0 of each job stands in
# for the trainer and writes a Megatron-LM log (the format strings of
# tests/data/trainlogs/make_fixtures.py) whose step times are the plan's
# own computation and exposed communication scaled by known factors, and
# whose memory report is the stage's predicted bytes with a known reserve;
# `pipette observe --record` stores each job's observation; `pipette
# calibrate` must recover the factors within 5% with a lower leave-one-out
# error than the model alone; and a plan made under the fitted file
# (plugstack calibration=) applies them.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
PIPETTE_BIN=$PIPETTE_BUILDDIR/pipette
UNIFORM=$SRC/etc/examples/uniform-4x8-h100.json
PLANS=$T_TMP/plans
STORE=$T_TMP/store
LOGS=$T_TMP/logs
mkdir -m 1777 "$PLANS" "$STORE" "$LOGS"
trap 'plugstack_rm pipette; rm -rf "$T_TMP"' EXIT
pipette_on() { plugstack_set pipette "required $PLUGIN gpu=H100 bandwidth=$UNIFORM plan_dir=$PLANS $*"; }

# The factors the jobs "measure": computation 1.18x, exposed
# communication 1.45x the model's, and an allocator reserve of 40% of the
# activations (the model's rule is 25%, stack.c).
A=1.18
B=1.45
R=0.40
N=$T_NODES
G=$T_GPUS

# The trainer stand-in (rank 0): reads the plan file, writes 40 steps of
# Megatron's iteration line (--log-interval 1; the first three slow, as
# warm-up is) and rank 0's memory report, then records the observation.
cat >"$T_TMP/trainer.sh" <<'EOF'
#!/bin/bash
set -eu
[ "$SLURM_PROCID" = 0 ] || exit 0
plan=$PIPETTE_PLAN_FILE
log=$LOGS/$PIPETTE_PLAN_HASH.log
val() { grep -m1 "\"$1\":" "$plan" | sed 's/.*://; s/,$//'; }
stage0() { sed -n '/"per_stage"/,$p' "$plan" | grep -m1 "\"$1\":" | sed 's/.*://; s/,$//'; }
model=$(val model_s); comp=$(val model_compute_s); comm=$(val model_comm_s)
total=$(stage0 total_bytes); res=$(stage0 reserve_bytes); trans=$(stage0 transient_bytes)
outside=$(stage0 outside_allocator_bytes)
awk -v m="$model" -v c="$comp" -v e="$comm" -v a="$A" -v b="$B" -v r="$R" -v out="$outside" \
    -v tot="$total" -v res="$res" -v tr="$trans" -v gb="$PIPETTE_GLOBAL_BATCH" '
BEGIN {
    t = m + (a - 1) * c + (b - 1) * e
    print "------------------------ arguments ------------------------"
    print "  log_interval .................................... 1"
    print "  train_iters ..................................... 40"
    print "-------------------- end of arguments ---------------------"
    for (i = 1; i <= 40; i++) {
        ms = 1000 * t * (i <= 3 ? 3 : 1 + 0.002 * ((i * 7) % 5 - 2))
        printf " iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning rate: %.3E | global batch size: %5d | lm loss: %.6E | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n", i, 40, i * gb, ms, 1.5e-4, gb, 7.25
        if (i == 1) {
            # torch reserves the model bytes and the reserve; the CUDA
            # context and NCCL buffers lie outside its allocator
            mb = (tot - res - out + r * tr) / 1048576
            printf "[Rank 0] (after 1 iterations) memory (MB) | allocated: %.2f | max allocated: %.2f | reserved: %.2f | max reserved: %.2f\n", mb * 0.9, mb * 0.95, mb, mb
        }
    }
}' >"$log"
"$PIPETTE" observe --plan "$plan" --log "$log" --record "$STORE" >"$log.observed"
EOF
chmod 0755 "$T_TMP/trainer.sh"

pipette_on
M8=(--pipette-model=llama3-8b --pipette-global-batch=64 --pipette-seq-len=2048)
FIXES=("tp=8,pp=1,dp=4" "tp=1,pp=1,dp=32" "tp=2,pp=4,dp=4" "tp=4,pp=2,dp=4" "tp=8,pp=4,dp=1"
       "tp=4,pp=1,dp=8")
for fix in "${FIXES[@]}"; do
    srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${M8[@]}" --pipette-fix="$fix" \
        env LOGS="$LOGS" STORE="$STORE" A="$A" B="$B" R="$R" PIPETTE="$PIPETTE_BIN" \
        bash "$T_TMP/trainer.sh"
    assert_rc 0 "$fix: the job ran and recorded its observation"
done
assert_eq "${#FIXES[@]}" "$(find "$PLANS" -name 'pipette-plan-*.json' | grep -c .)" \
    "node 0 wrote one plan file per plan into plan_dir"
assert_eq "${#FIXES[@]}" "$(find "$STORE" -name '*.json' | grep -c .)" \
    "one observation per job in the store"
f=$(find "$LOGS" -name '*.observed' | sort | head -n 1)
assert_match "step time: measured [0-9.]+ s \(median of 30 steady steps, 10 warm-up skipped" \
    "$(cat "$f" 2>/dev/null)" "observe: the steady state of the log (the default 10 warm-up steps left out)"

run "$PIPETTE_BIN" observe --report "$STORE" --svg "$T_TMP/report.svg"
assert_rc 0 "observe --report draws the store"
assert_eq "${#FIXES[@]}" "$(grep -c "class='obs-step'" "$T_TMP/report.svg")" \
    "the report has one step-time point per job"
assert_eq "${#FIXES[@]}" "$(grep -c "class='obs-mem'" "$T_TMP/report.svg")" \
    "... and one memory point per stage that reported its peak"
assert_eq "${#FIXES[@]}" "$(grep -c "<title>job [0-9a-f]\{16\} (.*): llama3-8b on H100.*; step time predicted" \
    "$T_TMP/report.svg")" "... each step-time point names its job and model"
run "$PIPETTE_BIN" observe --report "$STORE"
assert_rc 2 "observe --report without --svg is a usage error"

run "$PIPETTE_BIN" calibrate --from "$STORE" --out "$T_TMP/site.json"
assert_rc 0 "calibrate fits the store"
echo "$OUT"
field() { grep -m1 "\"$1\":" "$T_TMP/site.json" | sed 's/.*://; s/,$//'; }
within() { awk -v x="$1" -v y="$2" -v tol="$3" 'BEGIN { exit !(x - y <= tol * y && y - x <= tol * y) }'; }
a=$(field compute_factor)
b=$(field comm_factor)
r=$(field reserve_fraction)
# holds NAME CMD...: a check that passes when CMD succeeds.
holds() {
    local name=$1
    shift
    if "$@"; then pass "$name"; else fail "$name"; fi
}
holds "the computation factor $a is within 5% of $A" within "$a" "$A" 0.05
holds "the communication factor $b is within 5% of $B" within "$b" "$B" 0.05
holds "the reserve share $r is within 5% of $R" within "$r" "$R" 0.05
lb=$(field loo_error_before)
la=$(field loo_error_after)
holds "leave-one-out error lower after calibration ($la) than before ($lb)" \
    awk -v x="$la" -v y="$lb" 'BEGIN { exit !(x < y) }'

# --- the store's unit is a job (issue 28, item 2) ------------------------------
# Every observe --record of one plan and log wrote a new observation: 20
# records of one job weighed 20 in the fit.  Now they replace one file.
hash1=$(basename "$(find "$LOGS" -name '*.log' | sort | head -n 1)" .log)
plan1=$(find "$PLANS" -name "pipette-plan-$hash1.json" | head -n 1)
for _ in $(seq 20); do
    run "$PIPETTE_BIN" observe --plan "$plan1" --log "$LOGS/$hash1.log" --record "$STORE"
done
assert_rc 0 "a job recorded 20 times more: observe runs"
assert_match "pipette: replaced the earlier observation of this plan and log: $STORE/$hash1-[0-9a-f]{16}\.json" \
    "$ERR" "... and says it replaced the job's observation"
assert_eq "${#FIXES[@]}" "$(find "$STORE" -name '*.json' | grep -c .)" "... and the store still holds one observation per job"
run "$PIPETTE_BIN" calibrate --from "$STORE"
assert_match "compute 1\.18[0-9]+  comm 1\.4[45]" "$OUT" "... and the fit is the six jobs'"

# --- fast and slow outliers alike (issue 28, item 3) ------------------------
# Fakes of other jobs (their log digest changed) whose measured step time
# is scaled: 2 at 0.3x pulled the compute factor from 1.18 to 0.51 and
# blocked the write; 6 at 1000x were absorbed.  Both are dropped and named.
# fakes N SCALE DIR: the store plus N fakes at SCALE in DIR.
fakes() {
    rm -rf "$3"
    cp -r "$STORE" "$3"
    local i=0 f
    for f in $(find "$STORE" -name '*.json' | sort | head -n "$1"); do
        i=$((i + 1))
        awk -v s="$2" -v d="$(echo "fake $i" | sha256sum | cut -c1-64)" '
            /"log_sha256":/ { sub(/"log_sha256":"[0-9a-f]+"/, "\"log_sha256\":\"" d "\"") }
            /"measured":/ { m = 1 }
            m && /"iteration_s":/ { split($0, kv, ":"); sub(/,$/, "", kv[2]); $0 = "    \"iteration_s\":" kv[2] * s ","; m = 0 }
            { print }' "$f" >"$3/fake$i.json"
    done
}
for spec in "2 0.3" "2 3.3" "6 1000" "6 0.001"; do
    read -r nf sc <<<"$spec"
    fakes "$nf" "$sc" "$T_TMP/faked"
    run "$PIPETTE_BIN" calibrate --from "$T_TMP/faked" --out "$T_TMP/faked.json"
    assert_rc 0 "$nf fakes at ${sc}x: calibrate fits and writes"
    a2=$(grep -m1 '"compute_factor":' "$T_TMP/faked.json" | sed 's/.*://; s/,$//')
    holds "$nf fakes at ${sc}x: the computation factor $a2 is within 1% of $A" within "$a2" "$A" 0.01
    want=$(seq -s ', ' -f 'fake%g.json' 1 "$nf")
    assert_match "outliers dropped from the fit .*: $want \(6 of $((6 + nf)) kept\)" "$OUT" \
        "$nf fakes at ${sc}x: the fakes are named as dropped"
done

# --- plan_dir: a user directory someone else planted ---------------------------
# The step runs with its plan; the plan file is refused with a warning.
PLANTED=$T_TMP/planted
mkdir -m 1777 "$PLANTED"
mkdir -m 0755 "$PLANTED/$(id -u)"
chown nobody "$PLANTED/$(id -u)"
plugstack_set pipette "required $PLUGIN gpu=H100 bandwidth=$UNIFORM plan_dir=$PLANTED"
srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${M8[@]}" --pipette-fix="tp=8,pp=1,dp=4" \
    bash -c '[ "$SLURM_PROCID" = 0 ] && echo "$PIPETTE_PLAN_HASH"; true'
assert_rc 0 "plan_dir with another user's UID directory: the step runs"
assert_match '^[0-9a-f]{16}$' "$OUT" "... with its plan"
assert_match "plan file $PLANTED/$(id -u)/pipette-plan-[0-9a-f]+\.json: cannot write it: Operation not permitted" \
    "$ERR" "... and a warning that the plan file was refused"
assert_eq "" "$(find "$PLANTED" -name '*.json' 2>/dev/null)" "... and no file written there"

# --- a plan under the site's fit ---------------------------------------------
pipette_on "calibration=$T_TMP/site.json"
srun_t -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "${M8[@]}" --pipette-fix="tp=8,pp=1,dp=4" \
    bash -c '[ "$SLURM_PROCID" = 0 ] && echo "$PIPETTE_PREDICTED_ITER_S $PIPETTE_PLAN_FILE"; true'
assert_rc 0 "a job under calibration=: runs"
read -r iter plan <<<"$OUT"
assert_match '"compute_factor":' "$(cat "$plan" 2>/dev/null)" "its plan file says which site factors it applied"
want=$(awk -v m="$(grep -m1 '"model_s":' "$plan" | sed 's/.*://; s/,$//')" \
           -v c="$(grep -m1 '"model_compute_s":' "$plan" | sed 's/.*://; s/,$//')" \
           -v e="$(grep -m1 '"model_comm_s":' "$plan" | sed 's/.*://; s/,$//')" -v a="$a" -v b="$b" \
           'BEGIN { printf "%.4f", m + (a - 1) * c + (b - 1) * e }')
assert_eq "$want" "$iter" "PIPETTE_PREDICTED_ITER_S is the model's time under the fitted factors"
finish
