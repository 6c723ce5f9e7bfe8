#!/bin/bash
# deb-smoke.sh: check the Debian packages built from debian/ on this machine.
# Installs the given .deb files with dpkg -i, checks what they put where,
# starts the local Slurm cluster of the integration tests
# (tests/integration/slurm-local.sh, on its own directory and ports) with a
# plugstack line naming the INSTALLED spank_pipette.so, and checks that srun
# loads it: --pipette-model=help lists the models, a llama3-8b step gets
# PIPETTE_TP and the other variables, a step without --pipette-model gets
# none.  Then it removes the cluster, and purges the packages it installed.
#
# Usage (root): tests/deb-smoke.sh [--keep] [DEB...]
#   DEB...   pipette_*.deb and slurm-spank-pipette_*.deb, and
#            python3-pipette_*.deb (checked when given or installed)
#            (dpkg-buildpackage writes them next to the source directory); none = test the
#            packages already installed and leave them installed
#   --keep   leave the packages installed
# Environment: PIPETTE_SLURM_BASE (default /tmp/pipette-slurm-deb),
# SLURM_LOCAL_CTLD_PORT (default 24817), SLURM_LOCAL_PORT_BASE (default
# 24900; below Linux's ephemeral ports): away from make check's defaults
# (16817, 17000) and make distcheck's (23817, 23900).
# Last line: "N passed, N failed"; exit status non-zero if anything failed.
# Not part of `make check`: it installs packages system-wide.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SL=$HERE/integration/slurm-local.sh
export PIPETTE_SLURM_BASE=${PIPETTE_SLURM_BASE:-/tmp/pipette-slurm-deb}
export SLURM_LOCAL_CTLD_PORT=${SLURM_LOCAL_CTLD_PORT:-24817}
export SLURM_LOCAL_PORT_BASE=${SLURM_LOCAL_PORT_BASE:-24900}
export SLURM_LOCAL_NODES=2 SLURM_LOCAL_GPUS=8
# No /etc/hosts lines: in loopback mode every slurmd is at 127.0.0.1.
export SLURM_LOCAL_HOSTS=0
TIMEOUT=${PIPETTE_TEST_TIMEOUT:-60}

keep=0
debs=()
for a in "$@"; do
    case $a in
        --keep) keep=1 ;;
        *.deb) debs+=("$a") ;;
        *) echo "deb-smoke: not a .deb: $a" >&2; exit 2 ;;
    esac
done

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok   - deb-smoke: $1"; }
fail() {
    failed=$((failed + 1)); echo "FAIL - deb-smoke: $1"; shift
    local l; for l in "$@"; do printf '       %s\n' "$l"; done
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected: $2" "actual:   $3"; fi; }

if [ "$(id -u)" != 0 ]; then
    fail "runs as root (dpkg -i, Slurm daemons)"
    finish
fi

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# ---- install --------------------------------------------------------------
installed_here=()
cluster=0
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    [ "$cluster" = 1 ] && bash "$SL" clean >/dev/null 2>&1
    if [ "$keep" = 0 ] && [ ${#installed_here[@]} -gt 0 ]; then
        dpkg --purge "${installed_here[@]}" >/dev/null 2>&1 \
            || echo "deb-smoke: dpkg --purge ${installed_here[*]} failed" >&2
    fi
}
trap cleanup EXIT

if [ ${#debs[@]} -gt 0 ]; then
    names=()
    for d in "${debs[@]}"; do
        n=$(dpkg-deb -f "$d" Package 2>/dev/null) || { fail "$d is a .deb"; finish; }
        names+=("$n")
        pkg_installed "$n" || installed_here+=("$n")
    done
    if out=$(dpkg -i "${debs[@]}" 2>&1); then
        pass "dpkg -i ${names[*]}"
    else
        fail "dpkg -i ${names[*]}" "$(tail -n 5 <<<"$out")"
        finish
    fi
fi
for n in pipette slurm-spank-pipette; do
    if pkg_installed "$n"; then pass "$n is installed"; else fail "$n is installed"; finish; fi
done

# ---- files ----------------------------------------------------------------
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
SO=/usr/lib/$MA/slurm-wlm/spank_pipette.so
check "the plugin is $SO" "$SO" "$(dpkg -L slurm-spank-pipette | grep '/spank_pipette\.so$')"
check "no libtool archive is shipped" "" "$(dpkg -L slurm-spank-pipette pipette | grep '\.la$')"
check "pipette.conf is a conffile of slurm-spank-pipette" "/etc/slurm/plugstack.conf.d/pipette.conf" \
    "$(dpkg-query -W -f='${Conffiles}' slurm-spank-pipette | awk '{print $1}')"
check "pipette.conf enables nothing until edited" "" \
    "$(grep -v '^[[:space:]]*\(#\|$\)' /etc/slurm/plugstack.conf.d/pipette.conf)"
check "the plugin does not link libslurm" "" "$(ldd "$SO" | grep libslurm)"
check "the plugin resolves all its libraries" "" "$(ldd "$SO" | grep 'not found')"
for b in pipette pipette-probe; do
    check "/usr/bin/$b comes from package pipette" "/usr/bin/$b" "$(dpkg -L pipette | grep "^/usr/bin/$b\$")"
done
if out=$(/usr/bin/pipette plan --model llama3-8b --gpu H100 --nodes 1 --gpus-per-node 8 \
        --global-batch 64 --seq-len 4096 --format env 2>&1) && grep -q '^PIPETTE_TP=' <<<"$out"; then
    pass "/usr/bin/pipette plan --format env prints PIPETTE_TP"
else
    fail "/usr/bin/pipette plan --format env prints PIPETTE_TP" "$(tail -n 3 <<<"$out")"
fi
check "example bandwidth caches in /usr/share/pipette/examples" 4 \
    "$(find /usr/share/pipette/examples -name '*.json' | wc -l)"

# ---- python3-pipette (when given or installed) ------------------------------
if pkg_installed python3-pipette; then
    PYDIR=/usr/lib/python3/dist-packages/pipette
    check "the Python package is in $PYDIR" "$PYDIR/__init__.py" \
        "$(dpkg -L python3-pipette | grep '/pipette/__init__\.py$')"
    check "its extension has the interpreter's suffix" \
        "$PYDIR/_pipette$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')" \
        "$(dpkg -L python3-pipette | grep '/_pipette[^/]*\.so$')"
    check "the extension resolves all its libraries" "" "$(ldd "$PYDIR"/_pipette*.so | grep 'not found')"
    # the README's command, from a directory without a pipette/ of its own
    if out=$(cd / && /usr/bin/python3 -c "import pipette; print(pipette.plan(model='llama3-8b', nodes=2, gpu='h100', global_batch=64)['chosen']['config']['dp'])" 2>&1) &&
        [[ $out =~ ^[1-9][0-9]*$ ]]; then
        pass "python3 -c 'import pipette; pipette.plan(...)[\"chosen\"]' works (dp $out)"
    else
        fail "python3 -c 'import pipette; pipette.plan(...)[\"chosen\"]' works" "$(tail -n 3 <<<"$out")"
    fi
fi

# ---- the installed plugin in a real Slurm ---------------------------------
export SLURM_LOCAL_PLUGSTACK="required $SO gpu=H100"
if out=$(bash "$SL" start 2>&1); then
    cluster=1
    pass "cluster with '$SLURM_LOCAL_PLUGSTACK' starts ($PIPETTE_SLURM_BASE)"
else
    cluster=1
    fail "cluster with '$SLURM_LOCAL_PLUGSTACK' starts ($PIPETTE_SLURM_BASE)" "$(tail -n 20 <<<"$out")"
    finish
fi
srun_() { timeout -k 5 "$TIMEOUT" bash "$SL" exec srun "$@"; }

out=$(srun_ -N1 -n1 --pipette-model=help true 2>&1)
if grep -qw 'llama3-8b' <<<"$out"; then
    pass "srun --pipette-model=help lists llama3-8b"
else
    fail "srun --pipette-model=help lists llama3-8b" "$(tail -n 5 <<<"$out")"
fi

# shellcheck disable=SC2016  # expanded in the tasks
line='echo "$SLURM_PROCID ${RANK-unset} ${PIPETTE_TP-unset} ${PIPETTE_PP-unset} ${PIPETTE_DP-unset} ${PIPETTE_CP-unset}"'
out=$(srun_ -N2 --ntasks-per-node=8 --gpus-per-node=8 --pipette-model=llama3-8b \
    --pipette-global-batch=64 bash -c "$line" 2>&1)
rc=$?
check "srun -N2 x 8 --pipette-model=llama3-8b exits 0" 0 "$rc"
tp=$(awk 'NF == 6 {print $3}' <<<"$out" | sort -u)
if [[ $tp =~ ^[1-9][0-9]*$ ]]; then
    pass "every task got one PIPETTE_TP ($tp)"
else
    fail "every task got one PIPETTE_TP" "$(head -n 5 <<<"$out")"
fi
# The ranks tp + TP*(cp + CP*(dp + DP*pp)) cover the 16 GPUs exactly.
prod=$(awk 'NF == 6 {print $3 * $4 * $5 * $6}' <<<"$out" | sort -u)
check "PIPETTE_TP x PP x DP x CP = 16 GPUs" 16 "$prod"
check "RANK 0..15 once each" "$(seq 0 15)" "$(awk 'NF == 6 {print $2}' <<<"$out" | sort -n)"

out=$(srun_ -N1 -n1 bash -c "$line" 2>&1)
check "a step without --pipette-model gets no PIPETTE_TP" "0 unset unset unset unset unset" "$out"

finish
