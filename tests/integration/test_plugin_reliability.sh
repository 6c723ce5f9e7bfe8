#!/bin/bash
# test_plugin_reliability.sh: no input can wedge a node, and every node of a
# step applies the same plan or the step fails.
#  - a FIFO named as the model or the cache fails the step at once, and the
#    nodes return to idle (before: slurmstepd blocked in open() for good);
#  - a planner that overruns the site's memory, CPU or wall-clock limit
#    fails the step with one line per node naming the limit;
#  - the site cache replaced between two nodes' reads (forced by the
#    test_cache_swap hook) never leaves a step with two plan hashes: the
#    node that read the other cache fails the step, naming itself;
#  - with a corrupted cache every failed step prints a reason naming a node.
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
M8=(--pipette-model=llama3-8b --pipette-global-batch=64 --pipette-seq-len=2048)
HASH_LINE='echo "$SLURMD_NODENAME ${PIPETTE_PLAN_HASH-unset}"'

# nodes_idle: every node is idle again within 10 s.
nodes_idle() {
    local i st
    for i in $(seq 1 100); do
        # shellcheck disable=SC2086
        st=$(timeout 10 ${SLURM_LOCAL_EXEC:-} sinfo -h -N -o %T 2>/dev/null | sort -u)
        [ "$st" = idle ] && return 0
        sleep 0.1
    done
    echo "$st"
    return 1
}

# fails_fast NAME ERE SECS CMD...: the step CMD (an srun command line, to
# which the task is appended) fails within SECS seconds, no task runs,
# every pipette: line names a node and matches ERE, and the nodes are idle
# afterwards.
fails_fast() {
    local name=$1 ere=$2 secs=$3 t0=$SECONDS lines
    shift 3
    slurm "$@" bash -c 'echo TASK-RAN'
    assert_ne 0 "$RC" "$name: the step fails"
    if [ $((SECONDS - t0)) -le "$secs" ]; then pass "$name: ... within $secs s"
    else fail "$name: ... within $secs s" "took $((SECONDS - t0)) s"; fi
    assert_eq "" "$OUT" "$name: no task ran"
    lines=$(grep 'pipette:' <<<"$ERR")
    assert_ne "" "$lines" "$name: a pipette: line says why"
    assert_eq "" "$(grep -Ev "pipette: node[0-9]+: .*$ere" <<<"$lines")" \
        "$name: every pipette: line names its node and says: $ere"
    if nodes_idle; then pass "$name: the nodes are idle again"; else fail "$name: the nodes are idle again"; fi
}

pipette_on "bandwidth=$UNIFORM"

# --- a FIFO where a file belongs --------------------------------------------
mkfifo -m 0666 "$T_TMP/fifo"
mkdir -p "$T_TMP/model.json"
fails_fast "FIFO as --pipette-model (user nobody)" "model config: .*fifo: is a FIFO, not a regular file" 5 \
    runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" srun --chdir=/tmp "${S4[@]}" \
    --pipette-model="$T_TMP/fifo" --pipette-global-batch=64 --pipette-seq-len=2048
fails_fast "FIFO as --pipette-bandwidth (user nobody)" "fifo: is a FIFO, not a regular file" 5 \
    runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" srun --chdir=/tmp "${S4[@]}" \
    "${M8[@]}" --pipette-bandwidth="$T_TMP/fifo"
fails_fast "a character device as the cache" "/dev/null: is a character device" 5 \
    srun "${S4[@]}" "${M8[@]}" --pipette-bandwidth=/dev/null
fails_fast "a directory as the model" "model\.json/config\.json: cannot open" 5 \
    srun "${S4[@]}" --pipette-model="$T_TMP/model.json" --pipette-global-batch=64 --pipette-seq-len=2048

# --- the planner's limits -----------------------------------------------------
# What a plan costs on the streaming cache reader (tests/bench/bench_cache.c,
# bench_plan.c): a 4096-node cache holds ~190 MiB while loading, past
# plan_memory=128; llama3-70b with a large batch takes about 1 s of CPU on
# a 2048-node cache (past plan_timeout=1 once the step's other work is
# counted) and 1.8-2.6 s on a 4096-node one (past plan_cpu=1).
run "$PIPETTE_BUILDDIR/pipette" bandwidth generate --seed 1 --nodes 2048 --gpu H100 \
    --prefix node -o "$T_TMP/big.json"
assert_rc 0 "a 2048-node cache is generated"
run "$PIPETTE_BUILDDIR/pipette" bandwidth generate --seed 1 --nodes 4096 --gpu H100 \
    --prefix node -o "$T_TMP/huge.json"
assert_rc 0 "a 4096-node cache is generated"
BIG=("emulate_nodes=node[1-2048]" "bandwidth=$T_TMP/big.json")
HUGE=("emulate_nodes=node[1-4096]" "bandwidth=$T_TMP/huge.json")
M70=(--pipette-model=llama3-70b --pipette-global-batch=4096 --pipette-seq-len=8192)
pipette_on "${HUGE[*]} plan_memory=128"
fails_fast "plan_memory=128" "plan_memory" 30 srun "${S4[@]}" "${M8[@]}"
pipette_on "${BIG[*]} plan_timeout=1 plan_cpu=60"
fails_fast "plan_timeout=1" "did not finish within 1 s \(plugstack plan_timeout=1\)" 10 \
    srun "${S4[@]}" "${M70[@]}"
pipette_on "${HUGE[*]} plan_cpu=1 plan_timeout=60"
fails_fast "plan_cpu=1" "more than 1 s of CPU time \(plugstack plan_cpu=1\)" 30 \
    srun "${S4[@]}" --pipette-model=llama3-70b --pipette-global-batch=8192 --pipette-seq-len=8192
rm -f "$T_TMP/huge.json"

# --- one plan per step: the cache replaced between two nodes' reads -----------
# Two versions of the site cache (the second with a slower node1-node2 link,
# so that it is a different measurement, not only other bytes).
SITE=$T_TMP/site.json
NEXT=$T_TMP/next.json
cp "$UNIFORM" "$T_TMP/a.json"
sed '0,/\[null, 45, 45, 45\]/s//[null, 3, 45, 45]/' "$UNIFORM" >"$T_TMP/b.json"
if cmp -s "$T_TMP/a.json" "$T_TMP/b.json"; then
    fail "the two cache versions differ"
fi
cp "$T_TMP/a.json" "$SITE"
pipette_on "bandwidth=$SITE"
srun_t "${S4[@]}" "${M8[@]}" bash -c "$HASH_LINE"
assert_rc 0 "no swap: the step runs"
assert_eq 1 "$(awk '{print $2}' <<<"$OUT" | sort -u | wc -l)" "no swap: one PIPETTE_PLAN_HASH on every task"
assert_match "^[0-9a-f]{16}$" "$(awk 'NR==1{print $2}' <<<"$OUT")" "PIPETTE_PLAN_HASH is 16 hex digits"

pipette_on "bandwidth=$SITE test_cache_swap=$NEXT"
split=0 clean=0 ran=0
for i in $(seq 1 50); do
    cp "$T_TMP/a.json" "$SITE"
    cp "$T_TMP/b.json" "$NEXT"
    srun_t "${S4[@]}" "${M8[@]}" bash -c "$HASH_LINE"
    [ "$(awk '{print $2}' <<<"$OUT" | sort -u | grep -c .)" -gt 1 ] && split=$((split + 1))
    [ "$RC" = 0 ] && ran=$((ran + 1))
    if [ "$RC" != 0 ] && grep -Eq "pipette: node[2-9]: bandwidth cache .*site\.json changed while the step started" <<<"$ERR"; then
        clean=$((clean + 1))
    fi
done
assert_eq 0 "$split" "cache swapped between nodes' reads: 0 of 50 steps with differing PIPETTE_PLAN_HASH"
assert_eq 50 "$clean" "... every one of the 50 fails, naming a node that read the new cache"
assert_eq 0 "$ran" "... and none runs half on the old plan"

# --- a corrupted cache: every failed step says why, naming a node -------------
pipette_on "bandwidth=$BW/bad-malformed.json"
named=0
for i in $(seq 1 12); do
    srun_t "${S4[@]}" "${M8[@]}" bash -c 'echo TASK-RAN'
    grep -Eq 'pipette: node[0-9]+: .*bad-malformed\.json' <<<"$ERR" && named=$((named + 1))
done
assert_eq 12 "$named" "corrupted cache: 12 of 12 failed steps print a node's reason"

finish
