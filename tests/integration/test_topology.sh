#!/bin/bash
# test_topology.sh: plugstack.conf's topology= through the real Slurm.
# Debian 12's Slurm 22.05 has no topology/block plugin, so the blocks come
# from a topology.conf named explicitly, as a GB200/GB300 NVL72 site names
# its own: the step's plan follows the blocks (TP groups of two trays stay
# inside a block even when the blocks are not runs of nodes in name order),
# every node plans the same, and a bad file fails the step naming the file
# and the line.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
trap 'plugstack_rm pipette; rm -rf "$T_TMP"' EXIT
[ "$T_NODES" -ge 4 ] && [ "$T_GPUS" -ge 4 ] || {
    echo "skip: needs 4 nodes of 4 GPUs (SLURM_LOCAL_NODES=$T_NODES, SLURM_LOCAL_GPUS=$T_GPUS)"
    finish
}

TOPO=$T_TMP/topology.conf
BAD=$T_TMP/bad-topology.conf
# GB200 trays: Slurm nodes of 4 GPUs in 72-GPU NVLink domains (pipette gpus).
pipette_on() { plugstack_set pipette "required $PLUGIN gpu=GB200 $*"; }
S4=(-N4 --ntasks-per-node=4 --gpus-per-node=4)
M8=(--pipette-model=llama3-8b --pipette-global-batch=64 --pipette-fix=tp=8)
# One line per task: its node, its global rank, the plan's TP and hash.
SHOW='echo "$SLURMD_NODENAME $RANK $PIPETTE_TP $PIPETTE_PLAN_HASH"'

# tp_blocks: for each TP group (8 consecutive ranks: Megatron's TP is the
# innermost dimension), the sorted set of nodes it spans, one per line.
tp_groups() {
    awk '{ print int($2 / 8), $1 }' <<<"$OUT" | sort -u -k1,1n -k2,2 |
        awk '{ s[$1] = s[$1] $2 "," } END { for (g in s) print s[g] }'
}

# --- blocks that are not runs in name order --------------------------------
printf '# two NVL72 racks, two trays of each in the job\nBlockName=rackA Nodes=node[1,3]\nBlockName=rackB \\\n    Nodes=node[2,4]\n' >"$TOPO"
pipette_on "topology=$TOPO"
srun_t "${S4[@]}" "${M8[@]}" bash -c "$SHOW"
assert_rc 0 "topology= with blocks node[1,3] and node[2,4]: the step runs"
assert_eq 16 "$(grep -c . <<<"$OUT")" "... 16 tasks report"
assert_eq 1 "$(awk '{print $3, $4}' <<<"$OUT" | sort -u | grep -c .)" \
    "... every task has the same plan (TP and plan hash) on every node"
assert_eq 8 "$(awk 'NR == 1 {print $3}' <<<"$OUT")" "... TP 8: two trays of 4 GPUs"
groups=$(tp_groups)
assert_eq "$(printf 'node1,node3,\nnode2,node4,')" "$(sort <<<"$groups")" \
    "... each TP group spans the two trays of one block (node1+node3, node2+node4)"

# --- the same trays, blocks in name order: the groups follow ---------------
printf 'BlockName=rackA Nodes=node[1-2]\nBlockName=rackB Nodes=node[3-4]\n' >"$TOPO"
srun_t "${S4[@]}" "${M8[@]}" bash -c "$SHOW"
assert_rc 0 "topology= with blocks node[1-2] and node[3-4]: the step runs"
assert_eq "$(printf 'node1,node2,\nnode3,node4,')" "$(tp_groups | sort)" \
    "... each TP group spans node1+node2 or node3+node4"

# --- a bad file fails the step, naming the file and the line ----------------
printf 'BlockName=rackA Nodes=node[1-2]\nSwitchName=s0 Nodes=node[3-4]\n' >"$BAD"
pipette_on "topology=$BAD"
srun_t "${S4[@]}" "${M8[@]}" bash -c "$SHOW"
assert_ne 0 "$RC" "a topology/tree line in topology=: the step fails"
assert_match "$BAD: line 2: SwitchName: a topology/tree switch" "$ERR" "... naming the file and line 2"
assert_eq "" "$OUT" "... and no task ran"
printf 'BlockName=rackA Nodes=node[1-2]\nBlockName=rackB Nodes=node[2-4]\n' >"$BAD"
srun_t "${S4[@]}" "${M8[@]}" bash -c "$SHOW"
assert_ne 0 "$RC" "a node in two blocks: the step fails"
assert_match "$BAD: line 2: node node2 of block 'rackB' is already in block 'rackA' \\(line 1\\)" \
    "$ERR" "... naming the file, the line and both blocks"
pipette_on "topology=$T_TMP/missing.conf"
srun_t "${S4[@]}" "${M8[@]}" true
assert_ne 0 "$RC" "topology= naming no file: the step fails"
assert_match "$T_TMP/missing.conf" "$ERR" "... naming the file"

finish
