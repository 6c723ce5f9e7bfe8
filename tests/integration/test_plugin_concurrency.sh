#!/bin/bash
# test_plugin_concurrency.sh: 20 steps running at once in one allocation
# (srun --overlap), each planning independently on every node: every step
# gets the same, consistent plan (each rank once, the same (node, task) ->
# (RANK, GPUs) map), and each step its own MASTER_PORT.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
HETERO=$SRC/etc/examples/hetero-8x8-h100.json
plugstack_set pipette "required $PLUGIN gpu=H100 bandwidth=$HETERO"
trap 'plugstack_rm pipette; rm -rf "$T_TMP"' EXIT

N=$T_NODES
G=$T_GPUS
NT=$((N * G))
STEPS=20

cat > "$T_TMP/steps.sh" <<EOF
#!/bin/bash
for i in \$(seq 1 $STEPS); do
    timeout $T_TIMEOUT srun --overlap -N$N --ntasks-per-node=$G --gpus-per-node=$G \\
        --pipette-model=llama3-70b --pipette-global-batch=256 --pipette-seq-len=4096 \\
        bash -c 'echo "\$SLURMD_NODENAME \$SLURM_LOCALID \$RANK \$CUDA_VISIBLE_DEVICES \$MASTER_ADDR \$MASTER_PORT \$PIPETTE_PLAN_HASH"' \\
        > "$T_TMP/step.\$i.out" 2> "$T_TMP/step.\$i.err" &
done
wait
EOF
chmod +x "$T_TMP/steps.sh"
t0=$SECONDS
slurm --timeout $((T_TIMEOUT * 3)) salloc -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "$T_TMP/steps.sh"
assert_rc 0 "salloc with $STEPS concurrent steps exits 0"
echo "       ($STEPS concurrent steps in $((SECONDS - t0)) s)"

ref=""
ports=""
bad=0
for i in $(seq 1 $STEPS); do
    out=$(cat "$T_TMP/step.$i.out" 2>/dev/null || true)
    ranks=$(awk '{print $3}' <<<"$out" | sort -n)
    if [ "$ranks" != "$(seq 0 $((NT - 1)))" ]; then
        bad=$((bad + 1))
        fail "step $i: ranks 0..$((NT - 1)) exactly once" "$(head -c 300 "$T_TMP/step.$i.err" 2>/dev/null)"
        continue
    fi
    map=$(awk '{print $1, $2, $3, $4, $5}' <<<"$out" | sort)
    if [ -z "$ref" ]; then ref=$map; elif [ "$map" != "$ref" ]; then
        bad=$((bad + 1)); fail "step $i: the same plan as step 1"
    fi
    p=$(awk '{print $6}' <<<"$out" | sort -u)
    if [ "$(grep -c . <<<"$p")" != 1 ]; then bad=$((bad + 1)); fail "step $i: one MASTER_PORT"; fi
    ports="$ports$p"$'\n'
done
assert_eq 0 "$bad" "$STEPS concurrent steps: each rank once, identical plans"
assert_eq "$STEPS" "$(grep . <<<"$ports" | sort -u | grep -c .)" "$STEPS concurrent steps: $STEPS distinct MASTER_PORTs"
hashes=$(cat "$T_TMP"/step.*.out 2>/dev/null | awk '{print $7}' | sort -u)
cli_hash=$("$PIPETTE_BUILDDIR/pipette" plan --model llama3-70b --global-batch 256 --seq-len 4096 \
    --nodes "node[1-$N]" --gpu H100 --bandwidth "$HETERO" --format env |
    sed -n "s/^PIPETTE_PLAN_HASH='\(.*\)'/\1/p")
assert_match '^[0-9a-f]+$' "$cli_hash" "'pipette plan' prints the heterogeneous cache's plan hash"
assert_eq "$cli_hash" "$hashes" "the plans use the heterogeneous cache (every task has 'pipette plan's hash)"

finish
