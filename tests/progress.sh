#!/usr/bin/env bash
# progress.sh: the progress line shows on a terminal and nowhere else.
#
# On a terminal (a pseudo-terminal from util-linux's `script`): `pipette
# plan` draws "\rpipette: estimating configurations N/M" on stderr and
# clears it ("\r\033[K") before the plan is printed; `pipette calibrate`
# draws "reading observations"; rank 0 of a 4-rank TCP probe on localhost
# draws "pairs measured" instead of its per-round lines.  Without one
# (stderr a file, as in a job's log): no carriage return, no escape and no
# progress text in either stream, the plan byte for byte what the terminal
# run printed, and the probe's per-round log lines.  The plugin has no
# progress code at all (no cli_progress symbol, no isatty).  Skips (77)
# without `script`.
set -uo pipefail
build=${PIPETTE_BUILDDIR:-$PWD}
BIN=$build/pipette
PROBE=$build/pipette-probe
PLUGIN=$build/plugin/.libs/spank_pipette.so
command -v script >/dev/null || { echo "progress.sh: SKIP: no script (bsdutils)"; exit 77; }
T=$(mktemp -d /tmp/pipette-progress.XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "progress.sh: FAIL: $*" >&2; fails=$((fails + 1)); }
ok() { echo "progress.sh: ok: $*"; }
CR=$'\r'
ESC=$'\033'

# On a terminal: both streams into the transcript, newlines as \r\n.
on_tty() { script -qec "$1" /dev/null >"$2" 2>&1 </dev/null; }

# ---- plan
PLAN="$BIN plan --model llama3-8b --nodes 2 --gpu h100 --global-batch 64"
on_tty "$PLAN" "$T/plan.tty" || fail "plan on a terminal: exit $?"
grep -q -a "${CR}pipette: estimating configurations [0-9]*/[0-9]*${ESC}\[K" "$T/plan.tty" &&
	ok "plan: progress on a terminal" || fail "plan: no progress line on a terminal"
grep -q -a "${CR}${ESC}\[Kpipette plan: llama3-8b" "$T/plan.tty" &&
	ok "plan: the line cleared before the plan" || fail "plan: the progress line not cleared"
$PLAN >"$T/plan.out" 2>"$T/plan.err" || fail "plan without a terminal: exit $?"
if grep -q -a -e "$CR" -e "$ESC" -e "estimating" "$T/plan.out" "$T/plan.err"; then
	fail "plan: progress text without a terminal"
else
	ok "plan: no progress without a terminal"
fi
# the terminal's transcript less the progress and the pty's \r is the plan
# (but for the search's wall-clock time)
sed -e "s/${CR}${ESC}\[K//g" -e "s/${CR}pipette: [^${ESC}]*${ESC}\[K//g" -e "s/${CR}\$//" \
	-e 's/; [0-9.]* s$//' "$T/plan.tty" >"$T/plan.tty.clean"
sed -e 's/; [0-9.]* s$//' "$T/plan.out" >"$T/plan.out.clean"
cmp -s "$T/plan.tty.clean" "$T/plan.out.clean" && ok "plan: the same plan either way" ||
	fail "plan: the terminal's plan differs: $(diff "$T/plan.tty.clean" "$T/plan.out.clean" | head -3)"

# ---- calibrate over a store
mkdir "$T/store"
for i in 1 2 3 4 5 6; do
	h=$(printf '%016x' $((i * 7919)))
	printf '{"schema":"pipette-obs/1","gpu":"H100-SXM-80GB","stack":"megatron","model":"llama3-8b",'\
'"plan_hash":"%s","log_sha256":"%s%s%s%s","predicted":{"iteration_s":%s,"compute_s":%s,"comm_s":%s},'\
'"measured":{"iteration_s":%s},"stages":[{"base_bytes":3e10,"transient_bytes":1e10,'\
'"measured_reserved_bytes":4.3e10,"predicted_bytes":4e10}]}\n' "$h" "$h" "$h" "$h" "$h" \
		"$i.0" "0.$((5 + i % 3))" "0.$((2 + i % 2))" "$i.2" >"$T/store/$h.json"
done
on_tty "$BIN calibrate --from $T/store" "$T/cal.tty"
grep -q -a "${CR}pipette: reading observations [0-9]*/6${ESC}\[K" "$T/cal.tty" &&
	ok "calibrate: progress on a terminal" || fail "calibrate: no progress line on a terminal"
"$BIN" calibrate --from "$T/store" >"$T/cal.out" 2>"$T/cal.err"
if grep -q -a -e "$CR" -e "$ESC" -e "reading observations" "$T/cal.out" "$T/cal.err"; then
	fail "calibrate: progress text without a terminal"
else
	ok "calibrate: no progress without a terminal"
fi

# ---- the probe's rounds: ranks 1-3 in the background, rank 0 in front
probe() {	# probe MODE OUT: MODE tty or log
	local port=$((20000 + RANDOM % 20000)) r args="--transport tcp --sizes 16K,256K --reps 3 --timeout 10"
	pids=()
	for r in 3 2 1; do
		SLURM_PROCID=$r SLURM_NTASKS=4 SLURMD_NODENAME=node$r PIPETTE_PROBE_PORT=$port \
			PIPETTE_PROBE_ROOT=127.0.0.1 "$PROBE" $args >/dev/null 2>&1 &
		pids+=($!)
	done
	export SLURM_PROCID=0 SLURM_NTASKS=4 SLURMD_NODENAME=node0 PIPETTE_PROBE_PORT=$port \
		PIPETTE_PROBE_ROOT=127.0.0.1
	if [ "$1" = tty ]; then
		on_tty "$PROBE $args --out $T/$1.json" "$2"
	else
		"$PROBE" $args --out "$T/$1.json" >"$2" 2>&1
	fi
	r=$?
	wait "${pids[@]}"
	pids=()
	unset SLURM_PROCID SLURM_NTASKS SLURMD_NODENAME PIPETTE_PROBE_PORT PIPETTE_PROBE_ROOT
	return $r
}
if [ -x "$PROBE" ]; then
	probe tty "$T/probe.tty" || fail "probe on a terminal: exit $?"
	grep -q -a "${CR}pipette-probe: pairs measured [0-9]*/6${ESC}\[K" "$T/probe.tty" &&
		! grep -q -a "round [0-9]* of 3 done" "$T/probe.tty" &&
		ok "probe: the rounds as one line on a terminal" ||
		fail "probe: no progress line, or round lines, on a terminal"
	probe log "$T/probe.log" || fail "probe without a terminal: exit $?"
	if grep -q -a -e "$CR" -e "$ESC" -e "pairs measured [0-9]*/" "$T/probe.log"; then
		fail "probe: progress text without a terminal"
	elif [ "$(grep -c "round [0-9] of 3 done" "$T/probe.log")" != 3 ]; then
		fail "probe: not one log line per round without a terminal"
	else
		ok "probe: its log lines, no progress, without a terminal"
	fi
fi

# ---- the plugin draws nothing
if [ -f "$PLUGIN" ]; then
	if nm -D "$PLUGIN" | grep -q -e cli_progress -e ' isatty'; then
		fail "plugin: has progress code"
	else
		ok "plugin: no progress code"
	fi
fi

if [ "$fails" -gt 0 ]; then
	echo "progress.sh: $fails failure(s); the files were in $T" >&2
	trap - EXIT
	exit 1
fi
echo "progress.sh: progress on terminals only"
