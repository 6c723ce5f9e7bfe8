#!/bin/bash
# test_plugin_options.sh: every --pipette-* option, the PIPETTE_* input
# variables with command-line precedence, sbatch options reaching every
# srun step (and srun overriding them), and every plugstack argument.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
UNIFORM=$SRC/etc/examples/uniform-4x8-h100.json
HETERO=$SRC/etc/examples/hetero-8x8-h100.json
pipette_on() { plugstack_set pipette "required $PLUGIN gpu=H100 $*"; }
trap 'plugstack_rm pipette; rm -rf "$T_TMP"' EXIT

G=$T_GPUS
S2=(-N2 --ntasks-per-node="$G" --gpus-per-node="$G")
M8=(--pipette-model=llama3-8b --pipette-global-batch=64)
# "TP PP DP CP VPP MB GB SCHEDULE RECOMPUTE SP DO MEM ITER GAIN | args", once per distinct value.
SHOW='echo "$PIPETTE_TP $PIPETTE_PP $PIPETTE_DP $PIPETTE_CP $PIPETTE_VPP $PIPETTE_MICRO_BATCH $PIPETTE_GLOBAL_BATCH $PIPETTE_SCHEDULE $PIPETTE_RECOMPUTE $PIPETTE_SEQUENCE_PARALLEL $PIPETTE_DISTRIBUTED_OPTIMIZER $PIPETTE_PREDICTED_MEM_GIB $PIPETTE_PREDICTED_ITER_S $PIPETTE_MAPPING_GAIN | $PIPETTE_MEGATRON_ARGS"'
field() { awk -v f="$1" 'NR == 1 {print $f}' <<<"$OUT"; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }

pipette_on "bandwidth=$UNIFORM"

# --- --pipette-model / --pipette-global-batch / --pipette-seq-len ------------
srun_t "${S2[@]}" "${M8[@]}" bash -c "$SHOW"
assert_rc 0 "model + global batch: step exits 0"
assert_eq 1 "$(sort -u <<<"$OUT" | grep -c .)" "model + global batch: all tasks agree"
assert_eq 64 "$(field 7)" "--pipette-global-batch=64 -> PIPETTE_GLOBAL_BATCH=64"
assert_match '--seq-length 8192( |$)' "$OUT" "no --pipette-seq-len: the model's context (llama3-8b: 8192)"
base_mem=$(field 12)
srun_t "${S2[@]}" "${M8[@]}" --pipette-seq-len=2048 bash -c "$SHOW"
assert_match '--seq-length 2048( |$)' "$OUT" "--pipette-seq-len=2048 reaches PIPETTE_MEGATRON_ARGS"
assert_match '--global-batch-size 64( |$)' "$OUT" "PIPETTE_MEGATRON_ARGS carries the global batch"

# --- --pipette-fix and --pipette-schedule ---------------------------------
srun_t "${S2[@]}" "${M8[@]}" --pipette-fix=tp=2,pp=2,mb=1,recompute=selective,sp=1,do=0 bash -c "$SHOW"
assert_rc 0 "--pipette-fix: step exits 0"
assert_eq "2 2 1 selective 1 0" "$(awk 'NR == 1 {print $1, $2, $6, $9, $10, $11}' <<<"$OUT")" \
    "--pipette-fix=tp=2,pp=2,mb=1,recompute=selective,sp=1,do=0 pins TP, PP, MB, RECOMPUTE, SP, DO"
srun_t "${S2[@]}" "${M8[@]}" --pipette-stack=megatron-zb --pipette-fix=pp=2 --pipette-schedule=zb-h1 bash -c "$SHOW"
assert_eq "2 zb-h1" "$(awk 'NR == 1 {print $2, $8}' <<<"$OUT")" "--pipette-schedule=zb-h1 with pp=2 on the zero-bubble fork"
# torchtitan: the plan shards data parallelism and the launch is its overrides
TT='echo "$PIPETTE_STACK $PIPETTE_DP $PIPETTE_DP_SHARD $PIPETTE_DP_REPLICATE $PIPETTE_FSDP_RESHARD ${PIPETTE_MEGATRON_ARGS-unset} | $PIPETTE_LAUNCH_ARGS"'
srun_t "${S2[@]}" "${M8[@]}" --pipette-stack=torchtitan bash -c "$TT"
assert_rc 0 "--pipette-stack=torchtitan: step exits 0"
assert_eq 1 "$(sort -u <<<"$OUT" | grep -c .)" "--pipette-stack=torchtitan: all tasks agree"
read -r tt_stack tt_dp tt_shard tt_rep tt_reshard tt_margs _ <<<"$(head -n1 <<<"$OUT")"
assert_eq "torchtitan unset" "$tt_stack $tt_margs" "torchtitan: PIPETTE_STACK, and no Megatron arguments"
assert_eq "$tt_dp" "$((tt_shard * tt_rep))" "torchtitan: PIPETTE_DP = PIPETTE_DP_SHARD x PIPETTE_DP_REPLICATE ($tt_shard x $tt_rep)"
assert_match '^(always|never)$' "$tt_reshard" "torchtitan: PIPETTE_FSDP_RESHARD is always or never"
assert_match "\\| --parallelism.data_parallel_replicate_degree=$tt_rep --parallelism.data_parallel_shard_degree=$tt_shard " \
    "$OUT" "torchtitan: PIPETTE_LAUNCH_ARGS are torchtitan's overrides with the same sharding"
srun_t "${S2[@]}" "${M8[@]}" --pipette-stack=torchtitan --pipette-fix=dp_shard=8,reshard=never bash -c "$TT"
assert_eq "8 never" "$(awk 'NR == 1 {print $3, $5}' <<<"$OUT")" "--pipette-fix=dp_shard=8,reshard=never pins the FSDP sharding"
srun_t "${S2[@]}" "${M8[@]}" --pipette-fix=pp=2 --pipette-schedule=zb-h1 bash -c "$SHOW"
assert_ne 0 "$RC" "--pipette-schedule=zb-h1 on upstream Megatron: the step fails"
assert_match "pipette: node[0-9]+: stack megatron does not run schedule zb-h1" "$ERR" \
    "... saying that upstream Megatron does not run it"
srun_t "${S2[@]}" "${M8[@]}" --pipette-fix=schedule=1f1b --pipette-schedule=zb-h1 true
assert_ne 0 "$RC" "--pipette-schedule conflicting with --pipette-fix schedule= fails"
assert_match 'pipette: .*conflicts' "$ERR" "... with a 'conflicts' message"

# --- --pipette-mem-fraction -------------------------------------------------
# Default (the stack's rule): llama3-8b, 64 x 8192 on 16 H100 predicts base_mem GiB; with
# 0.5 the plan must fit 0.5 x 79.6 = 39.8 GiB.
srun_t "${S2[@]}" "${M8[@]}" --pipette-mem-fraction=0.5 bash -c "$SHOW"
assert_rc 0 "--pipette-mem-fraction=0.5: step exits 0"
mem=$(field 12)
if le "$mem" 39.8 && ! le "$base_mem" 39.8; then pass "--pipette-mem-fraction=0.5: $mem GiB <= 39.8 (default plan: $base_mem GiB)"
else fail "--pipette-mem-fraction=0.5 bounds the predicted memory" "with 0.5: $mem GiB, default: $base_mem GiB"; fi

# --- --pipette-bandwidth over the site's, --pipette-mapping ---------------
pipette_on "bandwidth=$HETERO"
srun_t -N4 --ntasks-per-node="$G" --gpus-per-node="$G" --pipette-model=llama3-70b --pipette-global-batch=256 \
    --pipette-seq-len=4096 bash -c 'echo $PIPETTE_MAPPING_GAIN $MASTER_ADDR'
assert_rc 0 "site bandwidth=hetero: step exits 0"
site_out=$(sort -u <<<"$OUT")
srun_t -N4 --ntasks-per-node="$G" --gpus-per-node="$G" --pipette-model=llama3-70b --pipette-global-batch=256 \
    --pipette-seq-len=4096 --pipette-bandwidth="$UNIFORM" bash -c 'echo $PIPETTE_MAPPING_GAIN $MASTER_ADDR'
assert_eq "1.0000 node1" "$(sort -u <<<"$OUT")" "--pipette-bandwidth=uniform overrides the site's cache (gain 1, rank 0 on node1)"
assert_ne "1.0000 node1" "$site_out" "the site's heterogeneous cache was in effect without the option ($site_out)"
srun_t -N4 --ntasks-per-node="$G" --gpus-per-node="$G" --pipette-model=llama3-70b --pipette-global-batch=256 \
    --pipette-seq-len=4096 --pipette-mapping=block bash -c 'echo $PIPETTE_MAPPING_GAIN $MASTER_ADDR'
assert_eq "1.0000 node1" "$(sort -u <<<"$OUT")" "--pipette-mapping=block: Slurm's order (gain 1, rank 0 on node1)"
pipette_on "bandwidth=$UNIFORM"

# --- --pipette-explain: once, from the first node ---------------------------
srun_t -N4 --ntasks-per-node="$G" --gpus-per-node="$G" "${M8[@]}" --pipette-explain true
assert_rc 0 "--pipette-explain: step exits 0"
assert_eq 1 "$(grep -c 'pipette: chosen:' <<<"$ERR")" "--pipette-explain prints the chosen configuration once"
assert_match 'pipette: +#  TP  PP' "$ERR" "--pipette-explain prints the ranked table"
assert_match 'pipette: search: [0-9]+ combinations' "$ERR" "--pipette-explain prints the reasons (search statistics)"
srun_t "${S2[@]}" "${M8[@]}" true
assert_no_match 'chosen:' "$ERR" "without --pipette-explain nothing is printed"

# --- --pipette-dry-run: print the plan, fail before any task ----------------
srun_t "${S2[@]}" "${M8[@]}" --pipette-dry-run bash -c 'echo TASK-RAN'
assert_ne 0 "$RC" "--pipette-dry-run fails the step"
assert_eq "" "$OUT" "--pipette-dry-run: no task ran"
assert_match "pipette: PIPETTE_TP='[0-9]+'" "$ERR" "--pipette-dry-run prints the variables"
assert_eq 1 "$(grep -c 'pipette: dry run' <<<"$ERR")" "--pipette-dry-run says so once"

# --- --pipette-model=help and =none ------------------------------------------
srun_t --pipette-model=help
assert_rc 0 "--pipette-model=help exits 0"
assert_match 'llama3-70b' "$OUT" "--pipette-model=help lists the presets"
sbatch_t --pipette-model=help --wrap true
assert_rc 0 "sbatch --pipette-model=help exits 0 (no job)"
assert_match 'llama3-8b' "$OUT" "sbatch --pipette-model=help lists the presets"
srun_t "${S2[@]}" --pipette-model=none bash -c 'echo ${PIPETTE_TP-unset} ${RANK-unset}'
assert_eq "unset unset" "$(sort -u <<<"$OUT")" "--pipette-model=none: untouched"

# --- PIPETTE_* input variables, command line first -------------------------
export PIPETTE_MODEL=llama3-8b PIPETTE_GLOBAL_BATCH=32 PIPETTE_SEQ_LEN=1024 PIPETTE_FIX=tp=2
srun_t "${S2[@]}" bash -c "$SHOW"
assert_rc 0 "PIPETTE_MODEL etc. without options: step exits 0"
assert_eq "2 32" "$(awk 'NR == 1 {print $1, $7}' <<<"$OUT")" "PIPETTE_FIX and PIPETTE_GLOBAL_BATCH are read"
assert_match '--seq-length 1024( |$)' "$OUT" "PIPETTE_SEQ_LEN is read"
srun_t "${S2[@]}" --pipette-global-batch=128 --pipette-fix=tp=4 bash -c "$SHOW"
assert_eq "4 128" "$(awk 'NR == 1 {print $1, $7}' <<<"$OUT")" "options win over PIPETTE_* variables"
export PIPETTE_EXPLAIN=1
srun_t "${S2[@]}" true
assert_eq 1 "$(grep -c 'pipette: chosen:' <<<"$ERR")" "PIPETTE_EXPLAIN=1 explains"
unset PIPETTE_EXPLAIN
pipette_on "bandwidth=$UNIFORM default=off"
srun_t "${S2[@]}" bash -c 'echo ${PIPETTE_TP-unset}'
assert_eq "unset" "$(sort -u <<<"$OUT")" "default=off: PIPETTE_MODEL alone does not turn pipette on"
srun_t "${S2[@]}" --pipette-model=llama3-8b bash -c 'echo ${PIPETTE_TP-unset} $PIPETTE_GLOBAL_BATCH'
assert_match '^[0-9]+ 32$' "$(sort -u <<<"$OUT")" "default=off: the option turns it on; PIPETTE_GLOBAL_BATCH still fills in"
unset PIPETTE_MODEL PIPETTE_GLOBAL_BATCH PIPETTE_SEQ_LEN PIPETTE_FIX
pipette_on "bandwidth=$UNIFORM"
# The option's own environment form (slurmrestd users) works too.
export SLURM_SPANK__SLURM_SPANK_OPTION_pipette_pipette_model=llama3-8b
export SLURM_SPANK__SLURM_SPANK_OPTION_pipette_pipette_global_batch=16
srun_t "${S2[@]}" bash -c 'echo $PIPETTE_GLOBAL_BATCH'
assert_eq "16" "$(sort -u <<<"$OUT")" "SLURM_SPANK__SLURM_SPANK_OPTION_pipette_* set the options"
unset SLURM_SPANK__SLURM_SPANK_OPTION_pipette_pipette_model SLURM_SPANK__SLURM_SPANK_OPTION_pipette_pipette_global_batch

# --- sbatch: options reach every step; srun overrides ---------------------
cat > "$T_TMP/job.sh" <<EOF
#!/bin/bash
echo "batch \${PIPETTE_TP-unset} \${PIPETTE_GLOBAL_BATCH-unset} \${RANK-unset} \${MASTER_ADDR-unset} \${PIPETTE_MEGATRON_ARGS:+args}"
srun bash -c 'echo "step1 \$RANK \$PIPETTE_GLOBAL_BATCH \$PIPETTE_TP"'
srun --pipette-global-batch=128 bash -c 'echo "step2 \$RANK \$PIPETTE_GLOBAL_BATCH"'
srun --pipette-model=none bash -c 'echo "step3 \${RANK-unset} \${MASTER_ADDR-unset}"'
EOF
sbatch_t --parsable "${S2[@]}" "${M8[@]}" -o "$T_TMP/job.out" "$T_TMP/job.sh"
assert_rc 0 "sbatch --pipette-model: submitted"
job=${OUT%%;*}
if wait_job "$job"; then pass "sbatch job COMPLETED"; else fail "sbatch job ended $JOB_STATE" "$(cat "$T_TMP/job.out" 2>/dev/null)"; fi
out=$(cat "$T_TMP/job.out" 2>/dev/null || true)
assert_match '^batch [0-9]+ 64 unset unset args$' "$(grep '^batch' <<<"$out")" \
    "batch step: job-level PIPETTE_* (incl. PIPETTE_MEGATRON_ARGS), no RANK or MASTER_ADDR"
batch_tp=$(grep '^batch' <<<"$out" | awk '{print $2}')
assert_eq "$(seq 0 $((2 * G - 1)))" "$(grep '^step1' <<<"$out" | awk '{print $2}' | sort -n)" "srun in sbatch: ranks 0..$((2 * G - 1)) once"
assert_eq "64 $batch_tp" "$(grep '^step1' <<<"$out" | awk '{print $3, $4}' | sort -u)" "srun in sbatch inherits the options (same plan as the batch step)"
assert_eq "128" "$(grep '^step2' <<<"$out" | awk '{print $3}' | sort -u)" "srun --pipette-global-batch overrides sbatch's"
assert_eq "unset unset" "$(grep '^step3' <<<"$out" | awk '{print $2, $3}' | sort -u)" "srun --pipette-model=none turns an inherited request off (no RANK, no MASTER_ADDR)"

# --- sbatch --export=NONE ------------------------------------------------------
sbatch_t --parsable --export=NONE "${S2[@]}" "${M8[@]}" -o "$T_TMP/job2.out" \
    --wrap 'echo "batch $PIPETTE_TP"; /usr/bin/srun /bin/bash -c "echo step \$RANK \$PIPETTE_TP"'
job=${OUT%%;*}
if wait_job "$job"; then pass "sbatch --export=NONE job COMPLETED"; else fail "sbatch --export=NONE job ended $JOB_STATE" "$(cat "$T_TMP/job2.out" 2>/dev/null)"; fi
out=$(cat "$T_TMP/job2.out" 2>/dev/null || true)
assert_match '^batch [0-9]+$' "$(grep '^batch' <<<"$out")" "sbatch --export=NONE: the batch step is planned"
assert_eq "$(seq 0 $((2 * G - 1)))" "$(grep '^step' <<<"$out" | awk '{print $2}' | sort -n)" "sbatch --export=NONE: its steps get ranks"

# --- plugstack arguments ------------------------------------------------------
pipette_on "bandwidth=$UNIFORM mem_fraction=0.5"
srun_t "${S2[@]}" "${M8[@]}" bash -c "$SHOW"
mem=$(field 12)
if le "$mem" 39.8; then pass "mem_fraction=0.5 (site): $mem GiB <= 39.8"; else fail "mem_fraction=0.5 (site)" "$mem GiB"; fi
srun_t "${S2[@]}" "${M8[@]}" --pipette-mem-fraction=0.8 bash -c "$SHOW"
mem=$(field 12)
if le "$mem" 63.8 && ! le "$mem" 39.8; then pass "--pipette-mem-fraction=0.8 overrides the site's mem_fraction=0.5: $mem GiB"
else fail "--pipette-mem-fraction=0.8 overrides the site's mem_fraction=0.5" "$mem GiB"; fi

pipette_on "bandwidth=$UNIFORM gpu=A100"
srun_t "${S2[@]}" "${M8[@]}" --pipette-explain true
assert_match 'A100' "$ERR" "gpu=A100: the plan is for A100s"
srun_t "${S2[@]}" "${M8[@]}" --pipette-precision=fp8-current true
assert_ne 0 "$RC" "--pipette-precision=fp8-current on A100s: the step fails"
assert_match "pipette: node[0-9]+: --precision fp8-current: the megatron stack cannot run it on A100-SXM-80GB, which has no FP8 tensor cores" \
    "$ERR" "... in one line naming the stack, the GPU and the recipe"

# --- --pipette-precision and the site's precision= --------------------------
PREC='echo "$PIPETTE_PRECISION | $PIPETTE_PREDICTED_ITER_S"'
pipette_on "bandwidth=$UNIFORM"
srun_t "${S2[@]}" "${M8[@]}" bash -c "$PREC"
assert_match '^bf16 \| ' "$OUT" "no --pipette-precision: the stack's bf16"
bf16_iter=$(awk 'NR == 1 {print $3}' <<<"$OUT")
srun_t "${S2[@]}" "${M8[@]}" --pipette-precision=fp8-current bash -c "$PREC"
assert_rc 0 "--pipette-precision=fp8-current on H100s: step exits 0"
assert_eq 1 "$(sort -u <<<"$OUT" | grep -c .)" "--pipette-precision: all tasks agree"
assert_match '^fp8-current \| ' "$OUT" "--pipette-precision=fp8-current -> PIPETTE_PRECISION=fp8-current"
fp8_iter=$(awk 'NR == 1 {print $3}' <<<"$OUT")
if le "$fp8_iter" "$bf16_iter"; then pass "FP8 is predicted no slower than BF16 ($fp8_iter s vs $bf16_iter s)"
else fail "FP8 is predicted no slower than BF16" "$fp8_iter s vs $bf16_iter s"; fi
pipette_on "bandwidth=$UNIFORM precision=fp8-delayed"
srun_t "${S2[@]}" "${M8[@]}" bash -c "$PREC"
assert_match '^fp8-delayed \| ' "$OUT" "precision=fp8-delayed: the site's recipe for jobs that name none"
srun_t "${S2[@]}" "${M8[@]}" --pipette-precision=bf16 bash -c "$PREC"
assert_match '^bf16 \| ' "$OUT" "--pipette-precision=bf16 overrides the site's precision="
pipette_on "bandwidth=$UNIFORM precision=fp7"
srun_t "${S2[@]}" "${M8[@]}" true
assert_ne 0 "$RC" "precision=fp7 in plugstack.conf: srun fails"
assert_match "plugstack argument precision: precision 'fp7'" "$ERR" "... naming the argument"

mkdir -p "$T_TMP/models"
cat > "$T_TMP/models/site-1b.json" <<'EOF'
{"model_type": "llama", "num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 16,
 "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 32000,
 "max_position_embeddings": 2048, "tie_word_embeddings": false}
EOF
pipette_on "bandwidth=$UNIFORM models=$T_TMP/models"
srun_t "${S2[@]}" --pipette-model=site-1b --pipette-global-batch=64 bash -c "$SHOW"
assert_rc 0 "models=DIR: a site model by name"
assert_match '--seq-length 2048( |$)' "$OUT" "models=DIR: its context length (2048) is the default sequence length"
srun_t --pipette-model=help
assert_match 'site-1b' "$OUT" "--pipette-model=help lists the site's models"
srun_t "${S2[@]}" --pipette-model="$T_TMP/models/site-1b.json" --pipette-global-batch=64 bash -c 'echo $PIPETTE_TP'
assert_rc 0 "--pipette-model=PATH to a config.json"

pipette_on "bandwidth=$UNIFORM budget=3"
srun_t "${S2[@]}" "${M8[@]}" --pipette-explain true
assert_rc 0 "budget=3: step exits 0"
assert_match '\((1|2|3) time estimates' "$ERR" "budget=3 bounds the mapping search"

pipette_on "bandwidth=$UNIFORM colour=blue"
srun_t "${S2[@]}" true
assert_ne 0 "$RC" "an unknown plugstack key fails the command"
assert_match "pipette: plugstack.conf: .*unknown key 'colour'" "$ERR" "... naming the key"

finish
