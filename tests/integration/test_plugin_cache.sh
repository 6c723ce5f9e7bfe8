#!/bin/bash
# test_plugin_cache.sh: the per-user plan cache (plugstack plan_cache=ROOT)
# against the real daemons (issue 17, item 2).
#  - a job's first step plans and writes one entry under ROOT/UID (a
#    directory of the user's, mode 0700); a second step with the same
#    inputs reads it (the entry is not rewritten) and its tasks get
#    byte-identical variables; other inputs make a new entry;
#  - whatever sits where the cache's files belong is refused, reported on
#    the step's stderr with its path and the reason, never followed, and
#    the step gets the plan it gets without the cache: a valid entry of
#    another uid, a corrupt or truncated entry, a FIFO or a symbolic link
#    as an entry, a symbolic link or a FIFO as ROOT/UID, a symbolic link
#    as ROOT.
# The local cluster's four nodes share one ROOT, so the nodes of a step
# find the entry the first of them stored.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

require_plugin
UNIFORM=$SRC/etc/examples/uniform-4x8-h100.json
pipette_on() { plugstack_set pipette "required $PLUGIN gpu=H100 bandwidth=$UNIFORM $*"; }
trap 'plugstack_rm pipette; rm -rf "$T_TMP"' EXIT

N=$T_NODES
G=$T_GPUS
S4=(-N"$N" --ntasks-per-node="$G" --gpus-per-node="$G")
M8=(--pipette-model=llama3-8b --pipette-global-batch=64 --pipette-seq-len=2048)
# One short line per task (long ones from 32 tasks interleave): its
# PIPETTE_GLOBAL_BATCH and PIPETTE_PLAN_HASH, and a hash of every variable
# of the plan and per task, without MASTER_PORT (it differs between steps
# by design: pipette_master_port) and the harness's own PIPETTE_* settings.
TASK_LINE='echo "$SLURMD_NODENAME $SLURM_PROCID ${PIPETTE_GLOBAL_BATCH-unset} ${PIPETTE_PLAN_HASH-unset} $(env | grep -E "^(PIPETTE_[A-Z_]*|RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|NODE_RANK|MASTER_ADDR|CUDA_VISIBLE_DEVICES)=" | grep -Ev "^PIPETTE_(SLURM_BASE|BUILDDIR)=" | sort | sha256sum | cut -c1-16)"'
batch() { awk '{ print $3 }' <<<"$OUT" | sort -u; }
ROOT=$T_TMP/plans
mkdir -m 1777 "$ROOT"
U=$(id -u)
UDIR=$ROOT/$U

entries() { find "$1" -maxdepth 1 -name '*.plan' 2>/dev/null | sort; }
count() { entries "$1" | grep -c .; }
# step ARGS...: a 4-node step printing TASK_LINE; OUT sorted.
step() {
    srun_t "${S4[@]}" "$@" bash -c "$TASK_LINE"
    OUT=$(sort <<<"$OUT")
}
# warned NAME ERE: the step's stderr has a "pipette: warning: NODE:" line
# matching ERE, and every pipette: line is such a warning.
warned() {
    local lines
    lines=$(grep 'pipette:' <<<"$ERR")
    assert_match "pipette: warning: node[0-9]+: $2" "$lines" "$1: reported on the step's stderr"
    assert_eq "" "$(grep -Ev "pipette: warning: node[0-9]+: plan cache" <<<"$lines")" \
        "$1: every pipette: line is a plan cache warning naming its node"
}
# craft KEY BODY OUT: a well-formed entry of KEY holding the text BODY.
craft() {
    local size sha
    size=$(wc -c <"$2")
    sha=$(sha256sum <"$2" | cut -d' ' -f1)
    { printf 'pipette-plan-cache 1\nkey %s\nsize %s\nsha256 %s\n\n' "$1" "$size" "$sha"
      cat "$2"; } >"$3"
}
body() { sed '1,/^$/d' "$1"; }

# --- without the cache: the plan every test below must give ---------------
pipette_on
step "${M8[@]}"
assert_rc 0 "without the cache: the step runs"
BASE=$OUT
assert_eq $((N * G)) "$(awk 'length($4) == 16 && $4 ~ /^[0-9a-f]+$/' <<<"$BASE" | grep -c .)" "without the cache: every task has a plan"
assert_eq 1 "$(awk '{ print $4 }' <<<"$BASE" | sort -u | grep -c .)" "without the cache: one PIPETTE_PLAN_HASH"
assert_eq $((N * G)) "$(awk '{ print $5 }' <<<"$BASE" | sort -u | grep -c .)" "without the cache: each task's variables its own (RANK)"

# --- first and second step ------------------------------------------------
pipette_on "plan_cache=$ROOT"
step "${M8[@]}"
assert_rc 0 "first step: runs"
assert_eq "$BASE" "$OUT" "first step: the plan without the cache"
assert_eq "$U 700 directory" "$(stat -c '%u %a %F' "$UDIR" 2>&1)" "first step: $UDIR is the user's, mode 0700"
assert_eq 1 "$(count "$UDIR")" "first step: one entry under ROOT/UID"
ENTRY=$(entries "$UDIR")
KEY=$(basename "$ENTRY" .plan)
assert_match '^[0-9a-f]{64}$' "$KEY" "the entry is named by a 64-digit hash"
assert_eq "$U 600 regular file" "$(stat -c '%u %a %F' "$ENTRY")" "the entry is the user's, mode 0600"
assert_eq "key $KEY" "$(sed -n 2p "$ENTRY")" "the entry's header names its key"
before=$(stat -c '%i %Y' "$ENTRY")
sleep 1.1   # a rewrite would show in the mtime too

step "${M8[@]}"
assert_rc 0 "second step: runs"
assert_eq "$BASE" "$OUT" "second step, same inputs: byte-identical variables on every task"
assert_eq "$ENTRY" "$(entries "$UDIR")" "second step: still the one entry"
assert_eq "$before" "$(stat -c '%i %Y' "$ENTRY")" "second step: the entry is read, not rewritten"
assert_eq "" "$(grep 'pipette:' <<<"$ERR")" "second step: nothing to report"

# Where the plan came from: the I line, shown with --pipette-explain (a
# key of its own: explain changes the result text).
step "${M8[@]}" --pipette-explain
step "${M8[@]}" --pipette-explain
assert_rc 0 "--pipette-explain, twice: runs"
assert_match "pipette: plan cache: the plan of this step comes from $UDIR/[0-9a-f]{64}\.plan" \
    "$ERR" "--pipette-explain: the second step says it read the plan from the cache"
assert_eq 2 "$(count "$UDIR")" "--pipette-explain: an entry of its own"

# --- other inputs, another entry -------------------------------------------
step --pipette-model=llama3-8b --pipette-global-batch=128 --pipette-seq-len=2048
assert_rc 0 "another global batch: runs"
assert_eq 128 "$(batch)" "another global batch: its plan"
assert_eq 3 "$(count "$UDIR")" "another global batch: a new entry"
OTHER=$(comm -13 <(printf '%s\n' "$ENTRY") <(entries "$UDIR") | while read -r e; do
    grep -q 'PIPETTE_GLOBAL_BATCH=128' "$e" && echo "$e"; done)
assert_eq 1 "$(grep -c . <<<"$OTHER")" "the new entry holds the other plan"
body "$OTHER" >"$T_TMP/other.body"

# --- a valid entry planted by another uid --------------------------------
# The other step's plan under this step's key, well formed: read, it would
# give every task PIPETTE_GLOBAL_BATCH=128.
craft "$KEY" "$T_TMP/other.body" "$T_TMP/planted"
install -m 0600 -o nobody "$T_TMP/planted" "$ENTRY"
step "${M8[@]}"
assert_rc 0 "entry of uid nobody: the step runs"
assert_eq "$BASE" "$OUT" "entry of uid nobody: ignored, the step gets its own plan"
warned "entry of uid nobody" "plan cache entry $ENTRY: owned by uid $(id -u nobody), not $U: ignored"
assert_eq "$U" "$(stat -c %u "$ENTRY")" "entry of uid nobody: replaced by the user's own"
# Control: the same bytes owned by the user are read, so the owner alone
# refused them above.
install -m 0600 "$T_TMP/planted" "$ENTRY"
step "${M8[@]}"
assert_eq 128 "$(batch)" "control: the same entry, the user's own, is read"
rm -f "$ENTRY"
step "${M8[@]}"
assert_eq "$BASE" "$OUT" "the entry is stored again"

# --- corrupt and truncated entries ----------------------------------------
sed -i 's/PIPETTE_GLOBAL_BATCH=64/PIPETTE_GLOBAL_BATCH=65/' "$ENTRY"
assert_match "PIPETTE_GLOBAL_BATCH=65" "$(cat "$ENTRY")" "one byte of the entry is changed"
step "${M8[@]}"
assert_rc 0 "corrupt entry: the step runs"
assert_eq "$BASE" "$OUT" "corrupt entry: ignored, the right plan"
warned "corrupt entry" "plan cache entry $ENTRY: checksum mismatch \(corrupt\): ignored"
size=$(stat -c %s "$ENTRY")
truncate -s $((size / 2)) "$ENTRY"
step "${M8[@]}"
assert_eq "$BASE" "$OUT" "truncated entry: ignored, the right plan"
warned "truncated entry" "plan cache entry $ENTRY: truncated or extended: [0-9]+ bytes of body"
assert_eq "$size" "$(stat -c %s "$ENTRY")" "truncated entry: replaced by a whole one"

# --- a FIFO and a symbolic link as the entry ----------------------------------
rm -f "$ENTRY"
mkfifo -m 0600 "$ENTRY"
t0=$SECONDS
step "${M8[@]}"
assert_rc 0 "FIFO as the entry: the step runs"
assert_eq "$BASE" "$OUT" "FIFO as the entry: the right plan"
if [ $((SECONDS - t0)) -le 20 ]; then pass "FIFO as the entry: not opened (the step took $((SECONDS - t0)) s)"
else fail "FIFO as the entry: not opened" "the step took $((SECONDS - t0)) s"; fi
warned "FIFO as the entry" "plan cache entry $ENTRY: is a FIFO, not a regular file: ignored"
assert_eq "regular file" "$(stat -c %F "$ENTRY")" "FIFO as the entry: replaced by an entry"
# A link to a well-formed entry of the user's elsewhere: following it
# would give PIPETTE_GLOBAL_BATCH=128.
install -m 0600 "$T_TMP/planted" "$T_TMP/elsewhere.plan"
rm -f "$ENTRY"
ln -s "$T_TMP/elsewhere.plan" "$ENTRY"
step "${M8[@]}"
assert_eq "$BASE" "$OUT" "symbolic link as the entry: not followed, the right plan"
warned "symbolic link as the entry" "plan cache entry $ENTRY: is a symbolic link, not a regular file: ignored"
assert_eq "regular file" "$(stat -c %F "$ENTRY")" "symbolic link as the entry: replaced by an entry"
assert_eq "$(cat "$T_TMP/planted")" "$(cat "$T_TMP/elsewhere.plan")" "symbolic link as the entry: its target untouched"

# --- ROOT/UID and ROOT themselves ---------------------------------------------
ROOT2=$T_TMP/plans2
mkdir -m 1777 "$ROOT2"
mkdir -m 0700 "$T_TMP/away"
ln -s "$T_TMP/away" "$ROOT2/$U"
pipette_on "plan_cache=$ROOT2"
step "${M8[@]}"
assert_rc 0 "symbolic link as ROOT/UID: the step runs"
assert_eq "$BASE" "$OUT" "symbolic link as ROOT/UID: the plan without the cache"
warned "symbolic link as ROOT/UID" "plan cache $ROOT2/$U: is a symbolic link, refused; planning without the cache"
assert_eq "" "$(ls -A "$T_TMP/away")" "symbolic link as ROOT/UID: nothing written where it points"
rm -f "$ROOT2/$U"
mkfifo -m 0600 "$ROOT2/$U"
step "${M8[@]}"
assert_eq "$BASE" "$OUT" "FIFO as ROOT/UID: the plan without the cache"
warned "FIFO as ROOT/UID" "plan cache $ROOT2/$U: is a FIFO, refused; planning without the cache"
ln -s "$ROOT" "$T_TMP/plans3"
pipette_on "plan_cache=$T_TMP/plans3"
step "${M8[@]}"
assert_eq "$BASE" "$OUT" "symbolic link as ROOT: the plan without the cache"
warned "symbolic link as ROOT" "plan cache $T_TMP/plans3: is a symbolic link, refused; planning without the cache"
chmod 0777 "$ROOT2"
rm -f "$ROOT2/$U"
pipette_on "plan_cache=$ROOT2"
step "${M8[@]}"
assert_eq "$BASE" "$OUT" "ROOT writable by all without the sticky bit: the plan without the cache"
warned "ROOT mode 0777" "plan cache $ROOT2: writable by group or others without the sticky bit \(mode 0777\)"
assert_eq "" "$(ls -A "$ROOT2")" "ROOT mode 0777: nothing made in it"

# --- plan_dir with the cache: node 0 writes the plan file on a hit too ------
# (issue 28, item 1) Only the planning branch wrote it: a step whose node 0
# read the plan (another node won the plan-once lock, or a later step's
# hit) gave every task a PIPETTE_PLAN_FILE that named no file.  The tasks
# of node 0 look for it (node 0 writes it before its tasks start).
PD=$T_TMP/pd
mkdir -m 1777 "$PD"
pipette_on "plan_cache=$ROOT plan_dir=$PD"
touch "$T_TMP/pd.mark"
PF_LINE='[ "$SLURM_NODEID" = 0 ] || exit 0; if test -f "$PIPETTE_PLAN_FILE"; then echo "present"; else echo "missing $PIPETTE_PLAN_FILE"; fi'
for k in 1 2 3; do
    srun_t -N2 --ntasks-per-node="$G" --gpus-per-node="$G" "${M8[@]}" bash -c "$PF_LINE"
    assert_rc 0 "plan_dir with plan_cache, step $k: runs"
    assert_eq "present" "$(sort -u <<<"$OUT")" "plan_dir with plan_cache, step $k: the plan file exists on node 0"
    rm -rf "${PD:?}/$U"
done
assert_eq 1 "$(find "$UDIR" -name '*.plan' -newer "$T_TMP/pd.mark" | grep -c .)" \
    "plan_dir with plan_cache: the steps shared one entry (planned once)"

# --- another user: a directory of its own -----------------------------------
pipette_on "plan_cache=$ROOT"
NB=$(id -u nobody)
slurm runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" srun --chdir=/tmp "${S4[@]}" "${M8[@]}" \
    bash -c "$TASK_LINE"
OUT=$(sort <<<"$OUT")
assert_rc 0 "user nobody: the step runs"
assert_eq "$BASE" "$OUT" "user nobody: the same plan"
assert_eq "$NB 700" "$(stat -c '%u %a' "$ROOT/$NB" 2>&1)" "user nobody: $ROOT/$NB is nobody's, mode 0700"
assert_eq "$NB" "$(entries "$ROOT/$NB" | xargs -r stat -c %u)" "user nobody: one entry, nobody's"

finish
