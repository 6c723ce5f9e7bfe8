# shellcheck shell=bash disable=SC2034
# (SC2034: T_NODES, OUT, JOB_STATE, ... are read by the test files.)
# lib.sh: a tiny test library for pipette's integration tests. Source it from
# a tests/integration/test_*.sh file, call the assertions, end with `finish`.
# `finish` prints "N passed, N failed" alone on the last line (run.sh adds
# these up) and exits non-zero if anything failed.
#
# The cluster is started by run.sh (or by hand: slurm-local.sh start). Every
# Slurm command goes through a timeout so that nothing can hang CI.

set -u

TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SLURM_LOCAL=$TESTS_DIR/slurm-local.sh
T_TIMEOUT=${PIPETTE_TEST_TIMEOUT:-60}     # seconds for one srun/sbatch/poll
T_NODES=${SLURM_LOCAL_NODES:-4}
T_GPUS=${SLURM_LOCAL_GPUS:-8}
T_PASSED=0
T_FAILED=0
T_NAME=$(basename "$0" .sh)

# The cluster's environment: SLURM_CONF, PIPETTE_SLURM_BASE, SLURM_LOCAL_EXEC
# (a prefix that enters the controller's namespace in netns mode).
eval "$(bash "$SLURM_LOCAL" env)"

T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/pipette-it.XXXXXX")
chmod 0755 "$T_TMP"
trap 'rm -rf "$T_TMP"' EXIT

# ---- reporting ----------------------------------------------------------
pass() { T_PASSED=$((T_PASSED + 1)); echo "ok   - $T_NAME: $1"; }
fail() {
    T_FAILED=$((T_FAILED + 1))
    echo "FAIL - $T_NAME: $1"
    shift
    local line
    for line in "$@"; do printf '       %s\n' "$line"; done
}

# assert_eq EXPECTED ACTUAL NAME
assert_eq() {
    if [ "$1" = "$2" ]; then pass "$3"; else fail "$3" "expected: $(show "$1")" "actual:   $(show "$2")"; fi
}

# assert_ne UNEXPECTED ACTUAL NAME
assert_ne() {
    if [ "$1" != "$2" ]; then pass "$3"; else fail "$3" "did not expect: $(show "$1")"; fi
}

# assert_match ERE ACTUAL NAME   (bash =~, the whole string must match if the
# ERE is anchored with ^...$)
assert_match() {
    if [[ $2 =~ $1 ]]; then pass "$3"; else fail "$3" "pattern: $1" "actual:  $(show "$2")"; fi
}

# assert_no_match ERE ACTUAL NAME
assert_no_match() {
    if [[ $2 =~ $1 ]]; then fail "$3" "pattern: $1 matched" "actual:  $(show "$2")"; else pass "$3"; fi
}

# assert_rc EXPECTED_RC NAME   (checks $RC from the last run/srun/sbatch)
assert_rc() {
    if [ "$RC" = "$1" ]; then pass "$2"; else fail "$2" "exit status $RC, expected $1" "stderr: $(show "$ERR")"; fi
}

# Shorten long values in failure messages; keep newlines visible.
show() {
    local s=${1//$'\n'/\\n}
    [ ${#s} -gt 600 ] && s="${s:0:600}...(${#s} chars)"
    printf '%s' "$s"
}

# ---- running commands ---------------------------------------------------
# run [--timeout SECS] CMD...: run CMD with a timeout; sets OUT (stdout),
# ERR (stderr) and RC (exit status; 124 = timed out).
run() {
    local t=$T_TIMEOUT
    if [ "${1:-}" = --timeout ]; then t=$2; shift 2; fi
    local o=$T_TMP/run.out e=$T_TMP/run.err
    RC=0
    timeout -k 5 "$t" "$@" >"$o" 2>"$e" </dev/null || RC=$?
    OUT=$(cat "$o"); ERR=$(cat "$e")
    [ "$RC" = 124 ] && ERR="$ERR${ERR:+$'\n'}(timed out after ${t}s: $*)"
    return 0
}

# slurm CMD...: a Slurm client command against the test cluster, with the
# timeout (in netns mode it runs in the controller's namespace).
slurm() {
    local t=$T_TIMEOUT
    if [ "${1:-}" = --timeout ]; then t=$2; shift 2; fi
    # shellcheck disable=SC2086
    run --timeout "$t" ${SLURM_LOCAL_EXEC:-} "$@"
}
srun_t()   { slurm srun "$@"; }
sbatch_t() { slurm sbatch "$@"; }

# wait_job JOBID [SECS]: poll squeue (not sbatch --wait, which polls slowly)
# until the job has finished; sets JOB_STATE (COMPLETED, FAILED, ..., or
# TIMEOUT_WAITING). Returns 0 if COMPLETED.
wait_job() {
    local id=$1 t=${2:-$T_TIMEOUT} deadline st
    deadline=$((SECONDS + t))
    while :; do
        # shellcheck disable=SC2086
        st=$(timeout 10 ${SLURM_LOCAL_EXEC:-} squeue -h -j "$id" -t all -o %T 2>/dev/null || true)
        case $st in
            PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|RESIZING|"") ;;
            *) JOB_STATE=$st; [ "$st" = COMPLETED ]; return ;;
        esac
        if [ $SECONDS -ge $deadline ]; then
            JOB_STATE=TIMEOUT_WAITING
            # shellcheck disable=SC2086
            timeout 10 ${SLURM_LOCAL_EXEC:-} scancel "$id" 2>/dev/null || true
            return 1
        fi
        sleep 0.1
    done
}

# ---- plugin stack -------------------------------------------------------
# plugstack_set NAME LINE: add "$LINE" as $PIPETTE_SLURM_BASE/etc/plugstack.conf.d/NAME.conf.
# srun, sbatch and slurmstepd re-read it on every job; a plugin with slurmd
# context code needs `slurm-local.sh restart` (or SLURM_LOCAL_PLUGSTACK at start).
plugstack_set() {
    mkdir -p "$SLURM_LOCAL_PLUGSTACK_DIR"
    printf '%s\n' "$2" > "$SLURM_LOCAL_PLUGSTACK_DIR/$1.conf"
}
plugstack_rm() { rm -f "$SLURM_LOCAL_PLUGSTACK_DIR/$1.conf"; }

# ---- end ----------------------------------------------------------------
finish() {
    echo "$T_PASSED passed, $T_FAILED failed"
    [ "$T_FAILED" -eq 0 ]
    exit
}

# require_plugin: set SRC (the source tree) and PLUGIN (the freshly built
# spank_pipette.so under PIPETTE_BUILDDIR), or fail the file and finish.
require_plugin() {
    SRC=$(cd "$TESTS_DIR/../.." && pwd)
    PLUGIN=${PIPETTE_BUILDDIR:-}/plugin/.libs/spank_pipette.so
    if [ -z "${PIPETTE_BUILDDIR:-}" ] || [ ! -f "$PLUGIN" ]; then
        fail "spank_pipette.so is built (PIPETTE_BUILDDIR='${PIPETTE_BUILDDIR:-}'; run make check-integration)"
        finish
    fi
}
