#!/bin/bash
# test_probe_netns.sh: pipette-probe --transport tcp under srun on the local
# cluster in network-namespace mode (slurm-local.sh, README.md "Modes"), with
# the links shaped by `tc`:
#   * every node's link is limited to FAST, node $SLOW's to SLOW_RATE (1/4),
#     both directions: tbf on vn<i> in pipctl (towards node i) and on eth0 in
#     pipnode<i> (from node i), so link i->j runs at min(rate i, rate j);
#   * one probe over the 4 nodes writes a pipette-bw/1 cache in which every
#     link of the slow node is below half the median of the other links;
#   * `pipette plan` with that cache keeps the slow node off the pipeline's
#     inner boundaries (block order puts it at stage 1 of 4) and reports a
#     mapping gain; without the cache it keeps block order;
#   * `--nodes` re-measures one node after its link was fixed: its links are
#     updated, every other link keeps its figure and its time;
#   * a node killed during the run is reported and left out; rank 0 exits 1
#     and still writes the links it measured.
# All traffic stays in the namespaces slurm-local.sh created; the qdiscs are
# removed at the end (also on failure).
#
# run.sh starts the cluster in loopback mode by default: then this file
# switches it to netns mode (slurm-local.sh stops the old one first) and,
# at the end, stops it (removing the namespaces and /etc/hosts lines) and
# starts it again in the mode it found, so later files still work.  If the
# cluster already runs in netns mode, it is used as it is.
# shellcheck disable=SC2016  # the single-quoted commands expand in the tasks
. "$(dirname "$0")/lib.sh"

PROBE=${PIPETTE_BUILDDIR:-}/pipette-probe
PIPETTE=${PIPETTE_BUILDDIR:-}/pipette
if [ -z "${PIPETTE_BUILDDIR:-}" ] || [ ! -x "$PROBE" ] || [ ! -x "$PIPETTE" ]; then
    fail "pipette-probe and pipette are built (PIPETTE_BUILDDIR='${PIPETTE_BUILDDIR:-}'; run make check-integration)"
    finish
fi
if [ "$T_NODES" -lt 4 ]; then
    fail "the cluster has at least 4 nodes (SLURM_LOCAL_NODES=$T_NODES)"
    finish
fi

NODES='node[1-4]'
# The slow node: block order places node2 at stage 1 of a 4-stage pipeline
# (two pipeline boundaries), so a mapping that ignored the cache would leave
# it on the critical path.  node3 is the one killed; rank 0 (node1) is kept.
SLOW=node2
KILLED=node3
# Rates: unshaped veth TCP on this 2-core box gives 0.4-1.3 GB/s and varies
# by 3x between links (measured here), so every link is shaped: FAST =
# 800 Mbit/s = 0.1 GB/s, SLOW_RATE = 1/4 of it.  Measured with these probe
# options: 0.07-0.10 GB/s and 0.023-0.025 GB/s, 3 s for the 4 nodes.
FAST=800mbit
SLOW_RATE=200mbit
# Small messages and few repetitions keep a full run at ~3 s; 2 MiB at
# 25 MB/s still takes 80 ms, far above the per-message overheads.
PROBE_OPTS=(--transport tcp --sizes "64K,512K,2M" --reps 3 --timeout 10)

# ---- the cluster in netns mode ------------------------------------------
ORIG_MODE=$(cat "$PIPETTE_SLURM_BASE/run/mode" 2>/dev/null || echo loopback)
ORIG_UP=0
bash "$SLURM_LOCAL" status >/dev/null 2>&1 && ORIG_UP=1
SWITCHED=0
RESTORED=0
SHAPED=0

unshape() {
    local i ns
    [ "$SHAPED" = 1 ] || return 0
    for i in 1 2 3 4; do
        ns=pipnode$i
        [ -e /var/run/netns/pipctl ] && tc -n pipctl qdisc del dev "vn$i" root 2>/dev/null
        [ -e "/var/run/netns/$ns" ] && tc -n "$ns" qdisc del dev eth0 root 2>/dev/null
    done
    SHAPED=0
    return 0
}

# Undo what this file did: qdiscs, then the cluster's mode.  Returns non-zero
# if the cluster could not be brought back.
restore() {
    [ "$RESTORED" = 1 ] && return 0
    RESTORED=1
    unshape
    [ "$SWITCHED" = 1 ] || return 0
    bash "$SLURM_LOCAL" stop || return 1
    if [ "$ORIG_UP" = 1 ]; then
        SLURM_LOCAL_MODE=$ORIG_MODE bash "$SLURM_LOCAL" start || return 1
    fi
}
trap 'restore >/dev/null 2>&1; rm -rf "$T_TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

end() {
    if restore; then
        [ "$SWITCHED" = 1 ] && pass "the cluster is back in $ORIG_MODE mode ($([ "$ORIG_UP" = 1 ] && echo running || echo stopped))"
    else
        fail "the cluster is back in $ORIG_MODE mode"
    fi
    finish
}

if [ "$ORIG_MODE" != netns ] || [ "$ORIG_UP" = 0 ]; then
    SWITCHED=1
    run --timeout 120 env SLURM_LOCAL_MODE=netns bash "$SLURM_LOCAL" start
    assert_rc 0 "the cluster starts in netns mode"
    [ "$RC" = 0 ] || end
fi
eval "$(bash "$SLURM_LOCAL" env)"
assert_eq "nsenter --net=/var/run/netns/pipctl" "$SLURM_LOCAL_EXEC" "client commands run in the controller's namespace"

ok=1
for i in 1 2 3 4; do
    [ -e "/var/run/netns/pipnode$i" ] && ip -n pipctl link show "vn$i" >/dev/null 2>&1 \
        && ip -n "pipnode$i" link show eth0 >/dev/null 2>&1 || ok=0
done
assert_eq 1 "$ok" "namespaces pipctl and pipnode1..4 with vn1..4 / eth0 exist"
[ "$ok" = 1 ] || end

# The probe finds rank 0 by its node name (SLURM_STEP_NODELIST); in netns
# mode slurm-local.sh maps the names to the namespace addresses in
# /etc/hosts.  SLURM_LOCAL_HOSTS=0 opts out of that: then name rank 0's
# address instead.
# Another local cluster's loopback lines for node1..4 (a second checkout's
# tests) make getaddrinfo prefer 127.0.0.1 whatever the order of the lines
# (RFC 6724 rule 2, scope): then rank 0 is named by address, as with
# SLURM_LOCAL_HOSTS=0.
others=$(grep -F '# pipette-slurm-local ' /etc/hosts | awk -v b="$PIPETTE_SLURM_BASE" '$NF != b' || true)
if [ -n "$others" ]; then
    echo "note: another local cluster's node names are in /etc/hosts; the probe gets rank 0's address"
fi
if [ "${SLURM_LOCAL_HOSTS:-1}" = 1 ] && [ -z "$others" ]; then
    assert_eq "${SLURM_LOCAL_SUBNET:-10.250.0}.11" "$(getent ahostsv4 node1 | awk 'NR == 1 { print $1 }')" \
        "node1 resolves to its namespace address"
else
    export PIPETTE_PROBE_ROOT=${SLURM_LOCAL_SUBNET:-10.250.0}.11
fi

# ---- shaping --------------------------------------------------------------
# shape I RATE: node I's link at RATE in both directions.
shape() {
    local r1=0 r2=0
    tc -n pipctl qdisc replace dev "vn$1" root tbf rate "$2" burst 64kb latency 50ms || r1=$?
    tc -n "pipnode$1" qdisc replace dev eth0 root tbf rate "$2" burst 64kb latency 50ms || r2=$?
    [ "$r1" = 0 ] && [ "$r2" = 0 ]
}
SHAPED=1
ok=1
for i in 1 2 3 4; do
    rate=$FAST
    [ "node$i" = "$SLOW" ] && rate=$SLOW_RATE
    shape "$i" "$rate" || ok=0
done
assert_eq 1 "$ok" "tc tbf on vn1..4 (pipctl) and eth0 (pipnode1..4)"
assert_match "tbf .* rate 200Mbit" "$(tc -n pipctl qdisc show dev "vn${SLOW#node}")" "$SLOW's link is shaped to $SLOW_RATE"
[ "$ok" = 1 ] || end

# gt A B: A > B numerically.
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }
# median_of: the median of the numbers on stdin, one a line.
median_of() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# ---- reading a cache ------------------------------------------------------
# cache_links FILE: one line "A B GBPS WHEN" per measured inter-node link,
# from the "inter" matrix (by "order"); WHEN is the link's entry in "links"
# if it has one, else the matrix's "when".  Relies on the layout
# pipette_bwcache_save writes (one matrix row per line, one link per line).
cache_links() {
    awk '
        /^  "inter": \{/ { inter = 1; next }
        inter && /^  \}/ { inter = 0 }
        !inter { next }
        /"order": \[/ { s = $0; sub(/.*\[/, "", s); sub(/\].*/, "", s); gsub(/[" ]/, "", s)
                        n = split(s, name, ","); next }
        /"matrix": \[/ { inm = 1; row = 0; next }
        /"links": \[/ { inl = 1; next }
        (inm || inl) && /^ *\]/ { inm = 0; inl = 0; next }
        inm { s = $0; gsub(/[][ ]/, "", s); sub(/,$/, "", s); m = split(s, v, ",")
              row++
              for (k = 1; k <= m; k++) if (v[k] != "null") g[row, k] = v[k]
              next }
        inl { a = $0; sub(/.*"a": "/, "", a); sub(/".*/, "", a)
              b = $0; sub(/.*"b": "/, "", b); sub(/".*/, "", b)
              w = $0; sub(/.*"when": "/, "", w); sub(/".*/, "", w)
              lw[a " " b] = w; next }
        /^    "when": "/ { w = $0; sub(/.*"when": "/, "", w); sub(/".*/, "", w); dflt = w }
        END { for (i = 1; i <= n; i++) for (k = 1; k <= n; k++)
                  if ((i, k) in g) {
                      key = name[i] " " name[k]
                      print key, g[i, k], (key in lw ? lw[key] : dflt)
                  } }
    ' "$1" | sort
}

# link_check LINKS SLOW: "ok" when every link of SLOW is below half the median
# of the links that do not touch it; else the offending figures.
link_check() {
    printf '%s\n' "$1" | awk -v s="$2" '
        $1 == s || $2 == s { slow[++ns] = $3 " (" $1 "->" $2 ")"; sv[ns] = $3; next }
        { f[++nf] = $3 }
        END {
            for (i = 1; i <= nf; i++) for (j = i + 1; j <= nf; j++)
                if (f[j] < f[i]) { t = f[i]; f[i] = f[j]; f[j] = t }
            med = nf % 2 ? f[(nf + 1) / 2] : (f[nf / 2] + f[nf / 2 + 1]) / 2
            bad = ""
            for (i = 1; i <= ns; i++) if (!(sv[i] < med / 2)) bad = bad " " slow[i]
            if (ns == 0 || nf == 0) print "no links"
            else if (bad != "") printf "median of the others %.4f; not below half:%s\n", med, bad
            else print "ok"
        }'
}

# ---- 1. all four nodes ----------------------------------------------------
CACHE=$T_TMP/bandwidth.json
t0=$SECONDS
slurm --timeout 90 srun -N4 -w "$NODES" --ntasks-per-node=1 "$PROBE" "${PROBE_OPTS[@]}" --out "$CACHE"
assert_rc 0 "srun pipette-probe --transport tcp over 4 nodes exits 0"
echo "       (probe over 4 shaped nodes: $((SECONDS - t0)) s)"
assert_match "12 of 12 directed links measured \(pipette-probe tcp\), 4 of 4 nodes took part, 0 pair failures" \
    "$ERR" "rank 0 reports every link measured"
assert_match "slow node: $SLOW " "$ERR" "the probe's summary flags $SLOW as slow"
assert_match "merged into $CACHE" "$ERR" "the probe merged into the cache"
run "$PIPETTE" bandwidth validate "$CACHE"
assert_rc 0 "pipette bandwidth validate accepts the probe's cache"
run "$PIPETTE" bandwidth show "$CACHE"
assert_match "4 of 4 nodes shown, 12 of 12 inter-node figures measured" "$OUT" "pipette bandwidth show: 12 of 12 figures"

LINKS1=$(cache_links "$CACHE")
assert_eq 12 "$(printf '%s\n' "$LINKS1" | grep -c .)" "the cache holds 12 directed links"
assert_eq ok "$(link_check "$LINKS1" "$SLOW")" "every link of $SLOW is below half the median of the others"
# tbf is a hard cap: a figure above 0.035 GB/s (0.025 + 40%) on a link of
# the slow node would mean the shaping is not what was measured.  Contention
# on a 2-core box can only make links slower, so the fast links are checked
# through their median.
assert_eq "" "$(printf '%s\n' "$LINKS1" | awk -v s="$SLOW" '($1 == s || $2 == s) && $3 > 0.035 { print }')" \
    "no link of $SLOW is above 0.035 GB/s (shaped at 0.025)"
med=$(printf '%s\n' "$LINKS1" | awk -v s="$SLOW" '$1 != s && $2 != s { print $3 }' | median_of)
if gt "$med" 0.05; then pass "median of the other links $med GB/s > 0.05 (shaped at 0.1)"; else fail "median of the other links > 0.05 GB/s (shaped at 0.1)" "median: $med"; fi

# ---- 2. pipette plan keeps the slow node off the critical path -----------
# plan_json OUT ARGS...: pipette plan --format json for llama3-8b on the four
# nodes, whitespace removed (json-c pretty-prints one value per line).
plan_json() {
    local out=$1; shift
    run "$PIPETTE" plan --model llama3-8b --nodes "$NODES" --gpus-per-node 8 --gpu H100 \
        --global-batch 256 --seq-len 4096 --top 1 --format json "$@"
    printf '%s' "$OUT" | tr -d '[:space:]' > "$out"
}
# cfg FILE KEY: a number from the chosen configuration.
cfg() { grep -o '"config":{[^}]*}' "$1" | head -n 1 | grep -o "\"$2\":[0-9]*" | cut -d: -f2; }
# mapping FILE KEY: a number from the mapping object (before its sigma).
mapping() { grep -o '"mapping":{[^[]*' "$1" | grep -o "\"$2\":[-0-9.e+]*" | cut -d: -f2; }
# stages FILE NODE: the pipeline stages NODE's ranks belong to.  Rank order
# is Megatron's default tp-cp-ep-dp-pp (NVIDIA/Megatron-LM
# megatron/core/parallel_state.py:617 @d98e8a64dd), so stage = rank / (tp * cp * dp).
stages() {
    local per=$(($(cfg "$1" tp) * $(cfg "$1" cp) * $(cfg "$1" dp)))
    grep -o '"rank":[0-9]*,"node":"[^"]*"' "$1" | sed 's/"rank":\([0-9]*\),"node":"\([^"]*\)"/\1 \2/' \
        | awk -v n="$2" -v per="$per" '$2 == n { print int($1 / per) }' | sort -un | tr '\n' ' ' | sed 's/ $//'
}

# 2a. Four stages pinned: one node per stage.  Block order has the slow node
# at stage 1 (boundaries 0-1 and 1-2); an end stage has one boundary.
P1=$T_TMP/plan-pp4.json
plan_json "$P1" --pp 4 --bandwidth "$CACHE"
assert_rc 0 "pipette plan --pp 4 --bandwidth CACHE exits 0"
assert_eq 4 "$(cfg "$P1" pp)" "the plan has 4 stages"
st=$(stages "$P1" "$SLOW")
assert_match "^(0|3)$" "$st" "$SLOW runs an end stage of the pipeline (one boundary, not two)"
gain=$(mapping "$P1" gain)
if gt "$gain" 1.05; then pass "mapping gain $gain > 1.05 over block order"; else fail "mapping gain > 1.05 over block order" "gain: $gain"; fi
it=$(mapping "$P1" iteration_s); bit=$(mapping "$P1" block_iteration_s)
if gt "$bit" "$it"; then pass "planned iteration ${it}s < block order ${bit}s"; else fail "planned iteration < block order" "planned $it, block $bit"; fi

# 2b. Control: without the cache every link is nominal, and the plan keeps
# Megatron's order, so 2a's move came from the measured links.
P0=$T_TMP/plan-nominal.json
plan_json "$P0" --pp 4
assert_rc 0 "pipette plan --pp 4 without a cache exits 0"
assert_eq 1 "$(stages "$P0" "$SLOW")" "without the cache $SLOW stays at stage 1 (block order)"

# 2c. The search's own choice with the cache: whatever it picks, the mapping
# is no worse than block order, and with 3 or more stages the slow node
# runs the first or the last one.
P2=$T_TMP/plan-free.json
plan_json "$P2" --bandwidth "$CACHE"
assert_rc 0 "pipette plan --bandwidth CACHE exits 0"
pp=$(cfg "$P2" pp)
it=$(mapping "$P2" iteration_s); bit=$(mapping "$P2" block_iteration_s)
if gt "$it" "$bit"; then fail "free plan: mapped iteration <= block order" "planned $it, block $bit"; else pass "free plan (pp $pp): mapped ${it}s <= block order ${bit}s"; fi
if [ -n "$pp" ] && [ "$pp" -ge 3 ]; then
    st=$(stages "$P2" "$SLOW")
    assert_match "(^| )(0|$((pp - 1)))( |$)" "$st" "free plan (pp $pp): $SLOW holds stage 0 or $((pp - 1)) (stages: $st)"
else
    assert_match "^[0-9]+$" "$pp" "free plan has a pipeline size ($pp)"
fi

# ---- 3. --nodes: re-measure the slow node after its link was fixed --------
sleep 1     # the cache's times have 1 s resolution
shape "${SLOW#node}" "$FAST"
assert_eq 0 "$?" "$SLOW's link reshaped to $FAST"
cp "$CACHE" "$T_TMP/before.json"
slurm --timeout 60 srun -N4 -w "$NODES" --ntasks-per-node=1 "$PROBE" "${PROBE_OPTS[@]}" --out "$CACHE" --nodes "$SLOW"
assert_rc 0 "srun pipette-probe --nodes $SLOW exits 0"
assert_match "6 of 12 directed links measured" "$ERR" "--nodes $SLOW measures its 6 directed links only"
LINKS2=$(cache_links "$CACHE")
assert_eq 12 "$(printf '%s\n' "$LINKS2" | grep -c .)" "the cache still holds 12 directed links"
assert_eq "$(printf '%s\n' "$LINKS1" | awk -v s="$SLOW" '$1 != s && $2 != s')" \
    "$(printf '%s\n' "$LINKS2" | awk -v s="$SLOW" '$1 != s && $2 != s')" \
    "links without $SLOW keep their figures and times"
# Every link of the slow node has a newer time, and their median figure
# rose clearly (shaped 0.025 -> 0.1 GB/s; a busy 2-core box has measured
# as little as 1.33x, so the test asks for 1.25x; the median, since one
# link can be measured low).
cmp=$(join <(printf '%s\n' "$LINKS1" | awk '{ print $1 ":" $2, $3, $4 }' | sort) \
           <(printf '%s\n' "$LINKS2" | awk '{ print $1 ":" $2, $3, $4 }' | sort) \
      | awk -v s="$SLOW" '$1 ~ ("(^|:)" s "(:|$)") { n++; if (!($5 > $3)) bad = bad " " $0 }
                          END { print (n == 6 && bad == "") ? "ok" : n " links;" bad }')
assert_eq ok "$cmp" "the 6 links of $SLOW have a newer time"
m1=$(printf '%s\n' "$LINKS1" | awk -v s="$SLOW" '$1 == s || $2 == s { print $3 }' | median_of)
m2=$(printf '%s\n' "$LINKS2" | awk -v s="$SLOW" '$1 == s || $2 == s { print $3 }' | median_of)
if gt "$m2" "$(awk -v a="$m1" 'BEGIN { print 1.25 * a }')"; then
    pass "median link of $SLOW went from $m1 to $m2 GB/s (rose by more than 1.25x)"
else
    fail "median link of $SLOW rose by more than 1.25x after the fix" "before $m1, after $m2"
fi

# ---- 4. a node that dies during the run ------------------------------------
# node3's probe is killed after 1 s (the run takes ~3 s): it either joins and
# disappears in round 1 or never joins.  Rank 0 must name it, exit 1, and
# merge what it measured into a fresh cache.
shape "${SLOW#node}" "$SLOW_RATE"
FCACHE=$T_TMP/partial.json
slurm --timeout 60 srun -N4 -w "$NODES" --ntasks-per-node=1 bash -c '
    cmd=("$@")
    if [ "$SLURMD_NODENAME" = '"$KILLED"' ]; then timeout -s KILL 1 "${cmd[@]}"; else "${cmd[@]}"; fi
    echo $? > '"$T_TMP"'/rc.$SLURMD_NODENAME' probe "$PROBE" "${PROBE_OPTS[@]}" --out "$FCACHE"
assert_rc 0 "srun with $KILLED killed returns (the wrapper records each status)"
assert_eq 1 "$(cat "$T_TMP/rc.node1" 2>/dev/null)" "rank 0 exits 1 (partial run)"
assert_eq 137 "$(cat "$T_TMP/rc.$KILLED" 2>/dev/null)" "$KILLED's probe was killed"
assert_match "left out: $KILLED" "$ERR" "rank 0 reports $KILLED as left out"
assert_match "3 of 4 nodes took part" "$ERR" "rank 0 counts 3 of 4 nodes"
assert_match "merged into $FCACHE" "$ERR" "rank 0 still merged into the cache"
run "$PIPETTE" bandwidth validate "$FCACHE"
assert_rc 0 "the partial cache validates"
LINKS3=$(cache_links "$FCACHE")
assert_eq "node1 node2
node1 node4
node2 node1
node2 node4
node4 node1
node4 node2" "$(printf '%s\n' "$LINKS3" | awk -v k="$KILLED" '$1 != k && $2 != k { print $1, $2 }')" \
    "the partial cache has every link among the surviving nodes"
assert_eq ok "$(link_check "$(printf '%s\n' "$LINKS3" | awk -v k="$KILLED" '$1 != k && $2 != k')" "$SLOW")" \
    "in the partial run $SLOW's links are still below half the others"

end
