#!/bin/bash
# test_crash_safety.sh: killing a cache writer at any point never leaves a
# truncated or corrupt bandwidth cache, and a corrupt cache is reported,
# never half-used.  Needs no Slurm (it lives here for the harness).
#
#  1. `pipette bandwidth merge OLD NEW -o TARGET`, TARGET holding OLD's
#     bytes, is killed with SIGKILL CRASH_MERGE_KILLS times (default 30).
#     Half the kills come after a delay spread over the whole run (measured
#     first, uninterrupted), half after the writer's temporary file appears,
#     spread over the write window (temp file seen -> renamed) measured in
#     the same run.  After each kill TARGET is byte-identical to OLD or to
#     the uninterrupted merge's output.
#  2. pipette-probe --transport tcp, 2 processes on localhost told their
#     rank through the SLURM_* variables (as tests/unit/test_probe_tcp.c
#     does), rank 0 merging into a copy of the same 128-node cache with
#     --out, rank 0 killed CRASH_PROBE_KILLS times (default 4) the same two
#     ways.  After each kill the cache is OLD's bytes, or a valid cache with
#     every old node plus node0 and the 2 newly measured links.
#  3. Syscall-exact kills (strace -e inject=SYSCALL:signal=KILL, when strace
#     is installed): at the temp file's write, its fsync, fchmod, the rename
#     and the directory fsync after it, for both writers.  Up to the rename
#     the cache is the old one and the writer's temp file is left; after it,
#     the new.  Each writer first removes the temp files of the writers
#     killed before it (it holds the cache's lock, so none is live).
#  4. The writers' temporary files: pipette_bwcache_save (core/inputs/bwcache_io.c)
#     writes ".NAME.tmp-XXXXXX" (mkstemp, mode 0600) in the cache's
#     directory, fsyncs, renames.  A killed writer leaves that file behind;
#     nothing removes it later.  It cannot be taken for the cache: its name
#     is hidden and unique, no reader opens it, and it holds a prefix of the
#     bytes the writer was writing.  A later run succeeds next to it.
#  5. A truncated cache, and one with bytes after the JSON, are rejected by
#     `pipette bandwidth validate` and `pipette plan --bandwidth` with a
#     message naming the file.
#
# Kill delays come from a fixed-seed LCG, so the sequence of delays is the
# same on every run; where they land in the writer's run depends on the
# machine's speed, which is why the window is measured first.
. "$(dirname "$0")/lib.sh"

PIPETTE=${PIPETTE_BUILDDIR:-}/pipette
PROBE=${PIPETTE_BUILDDIR:-}/pipette-probe
if [ -z "${PIPETTE_BUILDDIR:-}" ] || [ ! -x "$PIPETTE" ] || [ ! -x "$PROBE" ]; then
    fail "pipette and pipette-probe are built (PIPETTE_BUILDDIR='${PIPETTE_BUILDDIR:-}'; run make check-integration)"
    finish
fi
MERGE_KILLS=${CRASH_MERGE_KILLS:-30}
PROBE_KILLS=${CRASH_PROBE_KILLS:-4}
NODES=128           # 128 x 128 inter matrix + 128 intra matrices: ~190 KB
D=$T_TMP
t_start=$SECONDS

# Deterministic delays: a 31-bit LCG (the ANSI C rand() example's constants)
# from a fixed seed; frac prints the next value in [0, 1).
LCG=20260101
frac() {
    LCG=$(( (LCG * 1103515245 + 12345) % 2147483648 ))
    awk -v x="$LCG" 'BEGIN { printf "%.4f", x / 2147483648 }'
}
now_us() { echo "${EPOCHREALTIME/./}"; }
secs() { awk -v u="$1" 'BEGIN { printf "%.4f", u / 1e6 }'; }
tmp_files() { compgen -G "$1/.$2.tmp-*" || true; }
# tmp_count DIR NAME: sets TC to the number of NAME's temp files (no fork:
# it is polled).
tmp_count() {
    local a
    shopt -s nullglob
    a=("$1/.$2.tmp."* "$1/.$2.tmp-"*)
    shopt -u nullglob
    TC=${#a[@]}
}
tmp_exists() { tmp_count "$1" "$2"; [ "$TC" -gt 0 ]; }
# spin_us US: wait US microseconds without forking (sleep(1) would add its
# own start-up time, as long as the write window on a loaded machine).
spin_us() {
    local end=$(( ${EPOCHREALTIME/./} + $1 ))
    while [ "${EPOCHREALTIME/./}" -lt "$end" ]; do :; done
}

# profile PID T0 DIR NAME: poll DIR for NAME's temporary file until PID
# (started at T0, us) exits; sets P_TOTAL (run time, us), P_T1 (temp file
# first seen), P_WIN (seen -> gone) and P_RC.
profile() {
    local pid=$1 t0=$2 dir=$3 name=$4 t seen=0
    P_T1=0 P_WIN=0
    while kill -0 "$pid" 2>/dev/null; do
        if tmp_exists "$dir" "$name"; then
            [ $seen = 0 ] && { seen=1; P_T1=$(( $(now_us) - t0 )); }
        elif [ $seen = 1 ] && [ "$P_WIN" = 0 ]; then
            P_WIN=$(( $(now_us) - t0 - P_T1 ))
        fi
    done
    t=$(now_us)
    P_RC=0
    wait "$pid" || P_RC=$?
    P_TOTAL=$((t - t0))
    [ $seen = 1 ] && [ "$P_WIN" = 0 ] && P_WIN=$((t - t0 - P_T1))
    return 0
}

# kill_at I PID DIR NAME TOTAL WIN: SIGKILL PID; odd I after a delay in
# [0, TOTAL), even I once PID's temp file for NAME exists (one more than
# the stale ones of earlier kills) plus a delay in [0, WIN).  Sets
# K_EXITED=1 when PID had already finished.
kill_at() {
    local i=$1 pid=$2 dir=$3 name=$4 total=$5 win=$6 f stale
    f=$(frac)
    tmp_count "$dir" "$name"
    stale=$TC
    if [ $((i % 2)) = 1 ]; then
        sleep "$(awk -v f="$f" -v t="$total" 'BEGIN { printf "%.4f", f * t / 1e6 }')"
    else
        while kill -0 "$pid" 2>/dev/null; do
            tmp_count "$dir" "$name"
            [ "$TC" -gt "$stale" ] && break
        done
        spin_us "$(awk -v f="$f" -v w="$win" 'BEGIN { printf "%d", f * w }')"
    fi
    K_EXITED=1
    kill -0 "$pid" 2>/dev/null && K_EXITED=0
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 0
}

# check_temps DIR NAME REF LABEL: every temp file left in DIR for NAME is a
# hidden .NAME.tmp-XXXXXX, mode 0600 unless complete, holding a prefix of
# REF, and (unless complete) rejected by validate.  Each file is checked
# once (CHECKED); sets T_COUNT to the number of temp files.
declare -A CHECKED=()
check_temps() {
    local dir=$1 name=$2 ref=$3 label=$4 t n=0 bad=0 sz
    for t in $(tmp_files "$dir" "$name"); do
        n=$((n + 1))
        [ -n "${CHECKED[$t]:-}" ] && continue
        CHECKED[$t]=1
        sz=$(stat -c %s "$t")
        [[ $(basename "$t") =~ ^\.${name//./\\.}\.tmp-[A-Za-z0-9]{6}$ ]] || { bad=1; fail "$label: temp file name $t"; }
        [ "$(stat -c %a "$t")" = 600 ] || [ "$sz" = "$(stat -c %s "$ref")" ] ||
            { bad=1; fail "$label: partial temp file $t is mode 0600"; }
        if ! cmp -s -n "$sz" "$t" "$ref"; then
            bad=1; fail "$label: temp file $t ($sz bytes) is a prefix of the new cache"
        fi
        if [ "$sz" != "$(stat -c %s "$ref")" ] && "$PIPETTE" bandwidth validate "$t" >/dev/null 2>&1; then
            bad=1; fail "$label: validate rejects the partial temp file $t"
        fi
    done
    T_COUNT=$n
    return $bad
}

# ---- 1. bandwidth merge (with 3, its syscall-exact kills, and 4) ----------
"$PIPETTE" bandwidth generate --nodes $NODES --seed 1 -o "$D/old.json" 2>/dev/null
"$PIPETTE" bandwidth generate --nodes $NODES --seed 2 --noise 0.1 \
    --when 2026-06-01T00:00:00Z -o "$D/new.json" 2>/dev/null
mkdir -p "$D/m"
cp "$D/old.json" "$D/m/bw.json"
t0=$(now_us)
"$PIPETTE" bandwidth merge "$D/old.json" "$D/new.json" -o "$D/m/bw.json" >/dev/null 2>&1 &
profile $! "$t0" "$D/m" bw.json
assert_eq 0 "$P_RC" "merge: the uninterrupted merge succeeds"
cp "$D/m/bw.json" "$D/ref.json"
run "$PIPETTE" bandwidth validate "$D/ref.json"
assert_rc 0 "merge: the uninterrupted merge's output validates"
assert_eq "" "$(tmp_files "$D/m" bw.json)" "merge: an uninterrupted merge leaves no temp file"
assert_ne "$(cksum <"$D/old.json")" "$(cksum <"$D/ref.json")" "merge: the new cache differs from the old"
TOTAL=$P_TOTAL WIN=$((P_WIN > 1000 ? P_WIN : 1000))
echo "       (merge of $(stat -c %s "$D/old.json")-byte caches: $(secs "$TOTAL") s; temp file at $(secs "$P_T1") s, for $(secs "$P_WIN") s)"

HAVE_STRACE=0
command -v strace >/dev/null && HAVE_STRACE=1
# The points of pipette_bwcache_save, in order; the first write(2) of
# `bandwidth merge` is the temp file's (it reads with read(2) and prints
# after saving), the first fsync the temp file's, the second the
# directory's after the rename.
POINTS="write:1 fsync:1 fchmod:1 rename:1 fsync:2"
# exact_kills LABEL DIR POINTS CHECK-NEW CMD...: for each point SYSCALL:N,
# restore OLD and run CMD with KP set to the strace prefix that kills the
# writer with SIGKILL on entry to its N-th SYSCALL (which does not run);
# then check the outcome: before the rename, OLD's bytes and one more temp
# file; after it, CHECK-NEW passes.
exact_kills() {
    local label=$1 dir=$2 points=$3 check=$4 pt before stale=0
    shift 4
    if [ $HAVE_STRACE = 0 ]; then
        echo "       ($label: strace is not installed: the syscall-exact kills are skipped)"
        return 0
    fi
    for pt in $points; do
        cp "$D/old.json" "$dir/bw.json"
        tmp_count "$dir" bw.json
        before=$TC
        [ "$before" -gt 0 ] && stale=1
        KP=(strace -f -qq -o /dev/null -e trace="${pt%:*}"
            -e inject="${pt%:*}:signal=KILL:when=${pt#*:}")
        RC=0
        "$@" >/dev/null 2>&1 || RC=$?
        assert_ne 0 "$RC" "$label: killed at $pt"
        tmp_count "$dir" bw.json
        if [ "$pt" = fsync:2 ]; then
            "$check" "$dir/bw.json"
            assert_eq 0 $? "$label: killed at $pt (after the rename): the new cache"
            assert_eq 0 "$TC" "$label: killed at $pt: no temp file left (the writer removed those of the writers killed before it)"
        else
            cmp -s "$dir/bw.json" "$D/old.json"
            assert_eq 0 $? "$label: killed at $pt: the old cache, untouched"
            # Its own temp file; those of the writers killed before it
            # ($before) it removed under the lock.
            assert_eq 1 "$TC" "$label: killed at $pt: its temp file is left, older ones removed"
        fi
    done
    assert_eq 1 "$stale" "$label: a killed writer's temp file was there for the next one to remove"
}
is_ref() { cmp -s "$1" "$D/ref.json"; }
merge_exact() { "${KP[@]}" "$PIPETTE" bandwidth merge "$D/old.json" "$D/new.json" -o "$D/m/bw.json"; }
exact_kills "merge" "$D/m" "$POINTS" is_ref merge_exact
check_temps "$D/m" bw.json "$D/ref.json" "merge, exact kills"
prev=$T_COUNT

n_old=0 n_new=0 n_done=0 n_temp=0 bad=0
for ((i = 1; i <= MERGE_KILLS; i++)); do
    cp "$D/old.json" "$D/m/bw.json"
    "$PIPETTE" bandwidth merge "$D/old.json" "$D/new.json" -o "$D/m/bw.json" >/dev/null 2>&1 &
    kill_at "$i" $! "$D/m" bw.json "$TOTAL" "$WIN"
    if cmp -s "$D/m/bw.json" "$D/old.json"; then n_old=$((n_old + 1))
    elif cmp -s "$D/m/bw.json" "$D/ref.json"; then
        if [ "$K_EXITED" = 1 ]; then n_done=$((n_done + 1)); else n_new=$((n_new + 1)); fi
    else
        bad=$((bad + 1))
        fail "merge kill $i: the cache is neither the old nor the new one" \
            "$("$PIPETTE" bandwidth validate "$D/m/bw.json" 2>&1 | head -n 2)"
    fi
    check_temps "$D/m" bw.json "$D/ref.json" "merge kill $i" || bad=$((bad + 1))
    [ "$T_COUNT" -gt "$prev" ] && n_temp=$((n_temp + 1))
    prev=$T_COUNT
done
assert_eq 0 "$bad" "merge: $MERGE_KILLS timed kills, the cache is always the old or the complete new one"
echo "       (timed kills: $n_old left the old cache, $n_new the new one, $n_done came after the exit; $n_temp inside the write)"
assert_ne 0 "$n_old" "merge: some timed kills landed before the rename"

# A later run next to the stale temp files: unaffected, leaves none of its own.
cp "$D/old.json" "$D/m/bw.json"
run "$PIPETTE" bandwidth merge "$D/old.json" "$D/new.json" -o "$D/m/bw.json"
assert_rc 0 "merge: a later merge succeeds next to $prev stale temp files"
assert_eq "$(cksum <"$D/ref.json")" "$(cksum <"$D/m/bw.json")" "merge: ... and writes the same cache"
assert_eq "$prev" "$(tmp_files "$D/m" bw.json | grep -c .)" "merge: ... and leaves no temp file of its own"

# ---- 2. pipette-probe --out (with 3, its syscall-exact kills) -------------
echo "       (merge part: $((SECONDS - t_start)) s)"
# A TCP port nobody listens on (ss from iproute2; no python on a bare box).
free_port() {
    local p
    for p in $(seq $((40000 + RANDOM % 10000)) 50000); do
        ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
    done
    echo 45000
}
# probe_start DIR: rank 1, then rank 0 with --out DIR/bw.json; sets PIDS
# (rank 1) and PID0.
probe_start() {
    local port r out
    port=$(free_port)
    PIDS=()
    for r in 1 0; do     # rank 0 last: the other waits for it
        out=()
        [ $r = 0 ] && out=(--out "$1/bw.json")
        SLURM_PROCID=$r SLURM_NTASKS=2 SLURMD_NODENAME=node$r \
            PIPETTE_PROBE_PORT=$port PIPETTE_PROBE_ROOT=127.0.0.1 \
            "$PROBE" --transport tcp --sizes 16K,256K --reps 3 --timeout 10 \
            "${out[@]}" >/dev/null 2>"$D/probe.$r.err" &
        if [ $r = 0 ]; then PID0=$!; else PIDS+=($!); fi
    done
}
probe_reap() {
    local p
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    return 0
}
# The figures a complete probe merge leaves: the old nodes plus node0, the
# old links plus node0 <-> node1 (node1 is in the old cache).
OLD_LINKS=$((NODES * (NODES - 1)))
WANT="$((NODES + 1)) nodes, $((OLD_LINKS + 2)) of $(((NODES + 1) * NODES)) inter-node figures measured"

mkdir -p "$D/p"
cp "$D/old.json" "$D/p/bw.json"
t0=$(now_us)
probe_start "$D/p"
profile "$PID0" "$t0" "$D/p" bw.json
probe_reap
assert_eq 0 "$P_RC" "probe: an uninterrupted 2-process probe merges with --out"
run "$PIPETTE" bandwidth validate "$D/p/bw.json"
assert_match "ok: pipette-bw/1, $WANT" "$OUT" "probe: the merged cache has every old node and node0's links"
PTOTAL=$P_TOTAL PWIN=$((P_WIN > 1000 ? P_WIN : 1000))
echo "       (probe run: $(secs "$PTOTAL") s; temp file at $(secs "$P_T1") s, for $(secs "$P_WIN") s)"

# Rank 0 alone under strace (its fsync, fchmod and rename are the save's).
is_probe_new() {
    run "$PIPETTE" bandwidth validate "$1"
    [ "$RC" = 0 ] && [[ $OUT =~ ok:\ pipette-bw/1,\ $WANT ]]
}
probe_exact() {
    local port
    port=$(free_port)
    SLURM_PROCID=1 SLURM_NTASKS=2 SLURMD_NODENAME=node1 PIPETTE_PROBE_PORT=$port \
        PIPETTE_PROBE_ROOT=127.0.0.1 "$PROBE" --transport tcp --sizes 16K,256K \
        --reps 3 --timeout 10 >/dev/null 2>&1 &
    PIDS=($!)
    SLURM_PROCID=0 SLURM_NTASKS=2 SLURMD_NODENAME=node0 PIPETTE_PROBE_PORT=$port \
        PIPETTE_PROBE_ROOT=127.0.0.1 "${KP[@]}" "$PROBE" --transport tcp \
        --sizes 16K,256K --reps 3 --timeout 10 --out "$D/p/bw.json"
    local rc=$?
    probe_reap
    return $rc
}
exact_kills "probe" "$D/p" "fsync:1 fchmod:1 rename:1 fsync:2" is_probe_new probe_exact

n_old=0 n_new=0 n_temp=0 bad=0 prev=$(tmp_files "$D/p" bw.json | grep -c .)
for ((i = 1; i <= PROBE_KILLS; i++)); do
    cp "$D/old.json" "$D/p/bw.json"
    probe_start "$D/p"
    kill_at "$i" "$PID0" "$D/p" bw.json "$PTOTAL" "$PWIN"
    probe_reap
    if cmp -s "$D/p/bw.json" "$D/old.json"; then n_old=$((n_old + 1))
    else
        run "$PIPETTE" bandwidth validate "$D/p/bw.json"
        if [ "$RC" = 0 ] && [[ $OUT =~ ok:\ pipette-bw/1,\ $WANT ]]; then n_new=$((n_new + 1))
        else bad=$((bad + 1)); fail "probe kill $i: the cache is neither the old nor a complete new one" "$(show "$OUT$ERR")"
        fi
    fi
    # The bytes a probe writes differ per run (measured figures), so the
    # temp files are checked for name and mode, not content.
    for t in $(tmp_files "$D/p" bw.json); do
        [[ $(basename "$t") =~ ^\.bw\.json\.tmp-[A-Za-z0-9]{6}$ ]] || { bad=$((bad + 1)); fail "probe kill $i: temp file name $t"; }
    done
    n=$(tmp_files "$D/p" bw.json | grep -c .)
    [ "$n" -gt "$prev" ] && n_temp=$((n_temp + 1))
    prev=$n
done
assert_eq 0 "$bad" "probe: $PROBE_KILLS timed kills of the merging rank, the cache is always the old or a complete new one"
echo "       (timed kills: $n_old left the old cache, $n_new a new one; $n_temp inside the write)"

# The lock file stays; a killed holder's flock is gone with it, so the next
# probe merges at once (not after the 120 s lock wait).
cp "$D/old.json" "$D/p/bw.json"
t0=$SECONDS
probe_start "$D/p"
P_RC=0
wait "$PID0" || P_RC=$?
probe_reap
assert_eq 0 "$P_RC" "probe: a probe after the kills merges (the dead writers' lock is released)"
assert_match "^[0-9]$" "$((SECONDS - t0))" "probe: ... without waiting for the lock"
run "$PIPETTE" bandwidth validate "$D/p/bw.json"
assert_match "ok: pipette-bw/1, $WANT" "$OUT" "probe: ... into a complete cache"

# ---- 5. corrupt caches are reported, never half-used ----------------------
echo "       (probe part done: $((SECONDS - t_start)) s)"
REF=$D/ref.json
size=$(stat -c %s "$REF")
head -c $((size / 2)) "$REF" > "$D/trunc-half.json"
head -c $((size - 2)) "$REF" > "$D/trunc-end.json"      # drops the final '}' (the file ends "}\n")
head -c 1 "$REF" > "$D/trunc-1.json"
: > "$D/empty.json"
{ cat "$REF"; printf 'garbage\n'; } > "$D/garbage.json"
{ cat "$REF"; printf '{}\n'; } > "$D/second.json"
PLAN=(plan --model llama3-8b --nodes 4 --gpu H100 --global-batch 64 --seq-len 4096 --format env)
run "$PIPETTE" "${PLAN[@]}" --bandwidth "$REF"
assert_rc 0 "corrupt: plan with the intact cache succeeds (control)"
for f in trunc-half trunc-end trunc-1 empty garbage second; do
    run "$PIPETTE" bandwidth validate "$D/$f.json"
    assert_eq 2 "$RC" "corrupt: validate rejects $f.json"
    assert_match "$D/$f\.json" "$ERR" "corrupt: validate names $f.json"
    run "$PIPETTE" "${PLAN[@]}" --bandwidth "$D/$f.json"
    assert_eq 2 "$RC" "corrupt: plan --bandwidth rejects $f.json"
    assert_match "$D/$f\.json" "$ERR" "corrupt: plan names $f.json"
    assert_no_match "PIPETTE_TP" "$OUT" "corrupt: plan prints no plan from $f.json"
done

echo "       (test_crash_safety: $((SECONDS - t_start)) s)"
finish
