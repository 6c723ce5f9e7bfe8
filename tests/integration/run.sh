#!/bin/bash
# run.sh: pipette's integration tests. Starts the local Slurm cluster
# (slurm-local.sh; stopped again on exit if this script started it), runs
# every tests/integration/test_*.sh in order (or the files given as
# arguments), adds up their "N passed, N failed" lines, prints the total on
# the last line, and exits non-zero if anything failed.
#
# Environment: PIPETTE_BUILDDIR (the build tree: the plugin and the `pipette`
# binary; set by `make check-integration`), PIPETTE_SLURM_BASE (unset: a
# private cluster, see below) and the SLURM_LOCAL_* knobs of slurm-local.sh, PIPETTE_TEST_TIMEOUT (per command),
# PIPETTE_TEST_FILE_TIMEOUT (per test file, default 600 s),
# PIPETTE_SKIP_INTEGRATION (non-empty: skip everything, exit 77).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sl() { bash "$HERE/slurm-local.sh" "$@"; }
export SLURM_LOCAL_NODES=${SLURM_LOCAL_NODES:-4}
export SLURM_LOCAL_GPUS=${SLURM_LOCAL_GPUS:-8}
export PIPETTE_BUILDDIR=${PIPETTE_BUILDDIR:-}
FILE_TIMEOUT=${PIPETTE_TEST_FILE_TIMEOUT:-600}

# The Debian package build (debian/rules) sets PIPETTE_SKIP_INTEGRATION=1:
# it must not start daemons or edit /etc/hosts. 77 = SKIP for automake.
if [ -n "${PIPETTE_SKIP_INTEGRATION:-}" ]; then
    echo "run.sh: SKIP: PIPETTE_SKIP_INTEGRATION is set (package build); CI runs these tests"
    exit 77
fi

t0=$SECONDS
if [ "$(id -u)" != 0 ]; then
    echo "run.sh: the integration tests start Slurm daemons and must run as root" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

# Without PIPETTE_SLURM_BASE the run gets a cluster of its own (a fresh base
# and free ports, removed again on exit), so it never joins a cluster that
# another checkout or a benchmark started.  With it, a cluster already
# running there is used as it is and left running.
started=0
private=0
if [ -z "${PIPETTE_SLURM_BASE:-}" ]; then
    if ! priv=$(sl private); then
        echo "FAIL - run.sh: no private cluster (slurm-local.sh private failed)"
        echo "0 passed, 1 failed"
        exit 1
    fi
    eval "$priv"
    private=1
fi
if ! sl status >/dev/null 2>&1; then started=1; fi
if [ "$private" = 1 ]; then
    trap 'sl clean' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
elif [ "$started" = 1 ]; then
    trap 'sl stop' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
fi
echo "run.sh: starting the cluster ($SLURM_LOCAL_NODES nodes x $SLURM_LOCAL_GPUS GPUs, ${SLURM_LOCAL_MODE:-loopback}, base $PIPETTE_SLURM_BASE)"
if ! sl start; then
    echo "FAIL - run.sh: the Slurm cluster did not start (log tails above)"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "run.sh: cluster up after $((SECONDS - t0)) s"

if [ $# -gt 0 ]; then
    files=("$@")
else
    files=("$HERE"/test_*.sh)
fi

passed=0
failed=0
for f in "${files[@]}"; do
    [ -f "$f" ] || { echo "FAIL - run.sh: no test file $f"; failed=$((failed + 1)); continue; }
    name=$(basename "$f")
    t1=$SECONDS
    echo "=== $name"
    log=$(mktemp)
    timeout -k 10 "$FILE_TIMEOUT" bash "$f" </dev/null 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    rm -f "$log"
    if [ -z "$summary" ]; then
        echo "FAIL - $name: ended (exit status $rc) without a summary line"
        failed=$((failed + 1))
    else
        p=${summary%% passed*}
        q=${summary#*passed, }; q=${q%% failed}
        passed=$((passed + p))
        failed=$((failed + q))
        if [ "$rc" != 0 ] && [ "$q" = 0 ]; then
            echo "FAIL - $name: exit status $rc although it reported no failure"
            failed=$((failed + 1))
        fi
    fi
    echo "=== $name: $((SECONDS - t1)) s"
done

echo "run.sh: total $((SECONDS - t0)) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
