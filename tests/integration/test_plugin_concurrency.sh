#!/bin/bash
# test_plugin_concurrency.sh: steps running at once, and steps launched
# while the site's inputs are replaced (issue 28, items 6 and 7).
#  - 20 steps at once in one allocation (srun --overlap), each planning
#    independently on every node: every step gets the same, consistent plan
#    (each rank once, the same (node, task) -> (RANK, GPUs) map), and each
#    step its own MASTER_PORT;
#  - the cache replaced by pipette's writer between two nodes' reads (the
#    test_cache_swap hook): the nodes that read the new cache plan from the
#    version srun pinned, and the step runs on one plan;
#  - replaced by another tool (no version kept), with step_barrier=: the
#    nodes that read the new cache fail, and no task starts on the node that
#    planned;
#  - a storm: the cache replaced every 20 ms and the calibration every 50
#    ms (the median pace, checked) by pipette's writers
#    (tests/tools/replace_inputs) while 50 4-node steps launch at once:
#    every step that runs has one plan on all nodes, at least 95 % run, and
#    none runs a task after failing.  Each failed step's stderr and the
#    slurmd log lines of its step are printed.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
HETERO=$SRC/etc/examples/hetero-8x8-h100.json
plugstack_set pipette "required $PLUGIN gpu=H100 bandwidth=$HETERO"
STORM_PIDS=""
trap 'for p in $STORM_PIDS; do kill "$p" 2>/dev/null; done; plugstack_rm pipette; rm -rf "$T_TMP"' EXIT

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

# --- a replacement between two nodes' reads --------------------------------
PIPETTE_BIN=$PIPETTE_BUILDDIR/pipette
UNIFORM=$SRC/etc/examples/uniform-4x8-h100.json
S4=(-N"$N" --ntasks-per-node=1 --gpus-per-node="$G")
M8=(--pipette-model=llama3-8b --pipette-global-batch=64 --pipette-seq-len=2048)
HASH_LINE='echo "$SLURMD_NODENAME ${PIPETTE_PLAN_HASH-unset}"'
W=$T_TMP/site
BARRIER=$T_TMP/barrier
mkdir -m 0755 "$W" "$BARRIER"
# Two measurements of the cluster: b has a slow node1-node2 link.
cp "$UNIFORM" "$T_TMP/a.json"
sed '0,/\[null, 45, 45, 45\]/s//[null, 3, 45, 45]/' "$UNIFORM" >"$T_TMP/b.json"
run cmp -s "$T_TMP/a.json" "$T_TMP/b.json"
assert_rc 1 "the two cache versions differ"
# one_plan: the step ran a task on each node, all with one plan hash.
one_plan() {
    [ "$RC" = 0 ] && [ "$(awk '{print $1}' <<<"$OUT" | sort -u | grep -c .)" = "$N" ] &&
        [ "$(awk '{print $2}' <<<"$OUT" | sort -u | grep -c '^[0-9a-f]\{16\}$')" = 1 ] &&
        [ "$(awk '{print $2}' <<<"$OUT" | sort -u | grep -c .)" = 1 ]
}

# pipette's writer keeps what it replaces: the nodes that read b after
# node 0 read a (the hook renames b over the cache once node 0 has
# planned) plan from the version of a srun pinned.  Before: 0 of 5 ran.
plugstack_set pipette "required $PLUGIN gpu=H100 bandwidth=$W/bw.json test_cache_swap=$W/next.json"
ran=0
for i in 1 2 3 4 5; do
    cp "$T_TMP/b.json" "$W/bw.json"
    run "$PIPETTE_BIN" bandwidth merge -o "$W/bw.json" "$T_TMP/a.json"
    cp "$T_TMP/b.json" "$W/next.json"
    srun_t "${S4[@]}" "${M8[@]}" bash -c "$HASH_LINE"
    if one_plan; then ran=$((ran + 1)); else fail "swap $i: the step runs on one plan" "rc $RC" "$OUT" "$ERR"; fi
done
assert_eq 5 "$ran" "cache replaced by pipette between the nodes' reads: 5 of 5 steps run on one plan"
assert_eq 2 "$(find "$W/bw.json.versions" -type f | grep -c .)" "... which kept the replaced and the new content as versions"

# Replaced by another tool, no version: the nodes that read b fail the
# step.  With step_barrier= no node starts a task (before: node 0, which
# read a, ran its task on every such step).
plugstack_set pipette "required $PLUGIN gpu=H100 bandwidth=$W/bw.json test_cache_swap=$W/next.json step_barrier=$BARRIER"
quiet=0
for i in 1 2 3; do
    rm -rf "$W/bw.json.versions"
    cp "$T_TMP/a.json" "$W/bw.json"
    cp "$T_TMP/b.json" "$W/next.json"
    srun_t "${S4[@]}" "${M8[@]}" bash -c 'echo TASK-RAN on $SLURMD_NODENAME'
    if [ "$RC" != 0 ] && [ -z "$OUT" ] &&
        grep -Eq "pipette: node[2-4]: bandwidth cache .*changed while the step started" <<<"$ERR" &&
        grep -Eq "pipette: node1: no task of the step starts: node[2-4]: " <<<"$ERR"; then
        quiet=$((quiet + 1))
    else
        fail "barrier $i: the step fails, no task runs, node1 says why" "rc $RC" "$OUT" "$ERR"
    fi
done
assert_eq 3 "$quiet" "cache replaced without a version, step_barrier: 3 of 3 steps fail before any task starts"
assert_eq "" "$(find "$BARRIER" -name '.barrier-*' | head -n 3)" "... and leave no temporary file in the barrier's directory"

# --- the storm ----------------------------------------------------------
# Two calibrations: three observations of one plan each, the step times
# of tests/data/trainlogs/megatron.log scaled by 1, 1.03 and 0.98, and by
# 1.3 times that (compute factors 0.85 and 1.13).
run "$PIPETTE_BIN" plan --gpu h100 --model llama3-8b --global-batch 64 --seq-len 4096 \
    --nodes 2 --tp 2 --pp 4 --dp 2 --format json
printf '%s\n' "$OUT" >"$T_TMP/obs-plan.json"
mkdir "$T_TMP/sa" "$T_TMP/sb"
for k in 1.00 1.03 0.98; do
    for s in a b; do
        f=$k; [ $s = b ] && f=$(awk -v k="$k" 'BEGIN { print k * 1.3 }')
        awk -v k="$f" '{
            if (match($0, /elapsed time per iteration \(ms\): [0-9.]+/)) {
                split(substr($0, RSTART, RLENGTH), a, ": ")
                printf "%s%s: %.1f%s\n", substr($0, 1, RSTART - 1), a[1], a[2] * k, substr($0, RSTART + RLENGTH)
            } else print }' "$SRC/tests/data/trainlogs/megatron.log" >"$T_TMP/log-$s-$k.log"
        run "$PIPETTE_BIN" observe --plan "$T_TMP/obs-plan.json" --log "$T_TMP/log-$s-$k.log" --record "$T_TMP/s$s"
    done
done
run "$PIPETTE_BIN" calibrate --from "$T_TMP/sa" --out "$T_TMP/cal-a.json"
run "$PIPETTE_BIN" calibrate --from "$T_TMP/sb" --out "$T_TMP/cal-b.json"
run cmp -s "$T_TMP/cal-a.json" "$T_TMP/cal-b.json"
assert_rc 1 "the two calibrations differ"

rm -rf "$W" "$BARRIER"
mkdir -m 0755 "$W" "$BARRIER"
"$PIPETTE_BIN" bandwidth merge -o "$W/bw.json" "$T_TMP/a.json" >/dev/null
"$PIPETTE_BIN" calibrate --from "$T_TMP/sa" --out "$W/cal.json" >/dev/null
plugstack_set pipette "required $PLUGIN gpu=H100 bandwidth=$W/bw.json calibration=$W/cal.json step_barrier=$BARRIER"
# The writer, until told to stop: the cache every 20 ms and the
# calibration every 50 ms, each alternating between its two contents,
# through the library calls of `bandwidth merge -o` and `calibrate --out`
# (tests/tools/replace_inputs.c), from one process on absolute deadlines
# at a real-time priority.  (A shell loop of the two commands replaced
# them once every 170-410 ms on two cores under the 200 planners.)
WRITER=$PIPETTE_BUILDDIR/tests/tools/replace_inputs
[ -x "$WRITER" ] || fail "the storm's writer $WRITER is built (make)"
"$WRITER" --log "$T_TMP/replace.log" --stop "$T_TMP/stop" --seconds $((T_TIMEOUT * 3)) \
    --cache "$W/bw.json" "$T_TMP/a.json" "$T_TMP/b.json" 20 \
    --calibration "$W/cal.json" "$T_TMP/cal-a.json" "$T_TMP/cal-b.json" 50 \
    >"$T_TMP/writer.out" 2>"$T_TMP/writer.prio" &
STORM_PIDS="$STORM_PIDS $!"
storm_writer=$!

# 50 4-node steps at once (torchrun mode: one task per node).
STEPS=50
{
    echo '#!/bin/bash'
    echo "for i in \$(seq 1 $STEPS); do"
    echo "    ( timeout $T_TIMEOUT srun --overlap -N$N -n$N --ntasks-per-node=1 --gpus-per-node=$G \\"
    echo "        --pipette-model=llama3-8b --pipette-global-batch=64 --pipette-seq-len=2048 \\"
    echo "        bash -c '$HASH_LINE' >$T_TMP/storm.\$i.out 2>$T_TMP/storm.\$i.err"
    echo "      echo \"\$i \$?\" >>$T_TMP/storm.rc ) &"
    echo "done"
    echo "wait"
} >"$T_TMP/storm.sh"
chmod +x "$T_TMP/storm.sh"
t0=$SECONDS
slurm --timeout $((T_TIMEOUT * 2)) salloc -N"$N" --ntasks-per-node="$G" --gpus-per-node="$G" "$T_TMP/storm.sh"
storm_s=$((SECONDS - t0))
storm_job=$(grep -o 'Granted job allocation [0-9]*' <<<"$ERR" | grep -o '[0-9]*$')
touch "$T_TMP/stop"
wait "$storm_writer"
writer_rc=$?
STORM_PIDS=""

ran=0 split=0 ran_failed=0 failed=0
for i in $(seq 1 "$STEPS"); do
    rc=$(awk -v i="$i" '$1 == i { print $2 }' "$T_TMP/storm.rc" 2>/dev/null)
    OUT=$(cat "$T_TMP/storm.$i.out" 2>/dev/null) RC=${rc:-none}
    if one_plan; then
        ran=$((ran + 1))
        continue
    fi
    if [ "$RC" = 0 ]; then
        split=$((split + 1))
        fail "storm step $i: ran, but not one plan on all $N nodes" "$OUT"
        continue
    fi
    failed=$((failed + 1))
    [ -n "$OUT" ] && ran_failed=$((ran_failed + 1))
    # Everything that tells why: the whole stderr, the tasks' output, and
    # the step's lines in every slurmd log.
    echo "       --- storm step $i failed (rc $RC); its stderr:"
    sed 's/^/       | /' "$T_TMP/storm.$i.err" 2>/dev/null
    if [ -n "$OUT" ]; then echo "       --- its tasks' output:"; sed 's/^/       | /' <<<"$OUT"; fi
    step=$(grep -o "StepId=${storm_job:-none}\.[0-9]*" "$T_TMP/storm.$i.err" 2>/dev/null | head -n 1)
    step=${step#StepId=}
    if [ -n "$step" ]; then
        echo "       --- the slurmd log lines of step $step:"
        grep -h -F -e "[$step]" -e "StepId=$step " "$PIPETTE_SLURM_BASE"/log/slurmd-node*.log 2>/dev/null |
            tail -n 40 | sed 's/^/       | /'
    fi
done
bwn=$(grep -c '^cache ' "$T_TMP/replace.log" 2>/dev/null)
caln=$(grep -c '^calibration ' "$T_TMP/replace.log" 2>/dev/null)
plans=$(cat "$T_TMP"/storm.*.out 2>/dev/null | awk '{print $2}' | sort -u | grep -c .)
# The writer's pace: the median and the longest time from one
# replacement of KIND to the next, in ms (the log's lines: KIND END LATE).
gaps() { awk -v k="$1" '$1 == k { if (n++) print ($2 - prev) * 1000; prev = $2 }' \
    "$T_TMP/replace.log" 2>/dev/null | sort -g; }
median() { gaps "$1" | awk '{ v[NR] = $1 } END { if (NR) printf "%.0f", v[int((NR + 1) / 2)]; else printf "999999" }'; }
longest() { gaps "$1" | tail -n 1 | awk '{ printf "%.0f", $1 }'; }
bw_pace=$(median cache) cal_pace=$(median calibration)
echo "       (storm: $STEPS steps in $storm_s s; writer at $(sed -n 's/^replace_inputs: at //p' "$T_TMP/writer.prio");"
echo "        the cache replaced $bwn times, one every $bw_pace ms (median; longest gap $(longest cache) ms),"
echo "        the calibration $caln times, one every $cal_pace ms (longest gap $(longest calibration) ms);"
echo "        $ran ran on one plan, $failed failed, $ran_failed of those ran a task; $plans distinct plans)"
assert_eq "0:" "$writer_rc:$(grep -v '^replace_inputs: at ' "$T_TMP/writer.prio" | head -n 5)" "storm: the writer never fails"
assert_eq 0 "$split" "storm: every step that runs has one plan on all $N nodes"
assert_eq 0 "$ran_failed" "storm: no step runs a task after failing"
if [ $((ran * 100)) -ge $((STEPS * 95)) ]; then pass "storm: at least 95 % of the $STEPS steps run ($ran)"
else fail "storm: at least 95 % of the $STEPS steps run" "$ran ran"; fi
# The asked pace, with a quarter (cache) and a fifth (calibration) of
# slack for the scheduler's wake-up and the write itself (an fsync each).
if [ "$bw_pace" -le 25 ] && [ "$cal_pace" -le 60 ]; then
    pass "storm: the cache replaced every <= 25 ms and the calibration every <= 60 ms (median)"
else
    fail "storm: the cache replaced every <= 25 ms and the calibration every <= 60 ms (median)" \
        "cache $bw_pace ms, calibration $cal_pace ms"
fi
if [ "$plans" -ge 2 ]; then pass "storm: the steps pinned more than one content ($plans plans)"
else fail "storm: the steps pinned more than one content" "$plans plan"; fi
# What the writer left is what the commands write: the file holds one of
# the two contents `bandwidth merge` / `calibrate --out` wrote, and its
# versions are those two.
"$PIPETTE_BIN" bandwidth merge -o "$T_TMP/bw-b.json" "$T_TMP/b.json" >/dev/null
"$PIPETTE_BIN" bandwidth merge -o "$T_TMP/bw-a.json" "$T_TMP/a.json" >/dev/null
same() { cmp -s "$1" "$2" || cmp -s "$1" "$3"; }
if same "$W/bw.json" "$T_TMP/bw-a.json" "$T_TMP/bw-b.json" &&
    same "$W/cal.json" "$T_TMP/cal-a.json" "$T_TMP/cal-b.json" &&
    [ "$(find "$W/bw.json.versions" "$W/cal.json.versions" -type f | grep -c .)" = 4 ]; then
    pass "storm: the writer wrote the commands' bytes, and kept two versions of each file"
else
    fail "storm: the writer wrote the commands' bytes, and kept two versions of each file" \
        "$(find "$W/bw.json.versions" "$W/cal.json.versions" 2>&1)"
fi

finish
