#!/bin/bash
# slurm-local.sh: a real multi-node Slurm 22.05 "GPU cluster" on one host, for
# pipette's integration tests. Fake GPUs are character devices (c 1 3); the
# nodes are several slurmd on 127.0.0.1 (loopback mode) or one network+UTS
# namespace per node (netns mode). Everything lives under $PIPETTE_SLURM_BASE.
#
# Usage: slurm-local.sh start|stop|restart|status|env|exec CMD...|clean|private
#
# Facts behind the choices, with their sources: tests/integration/README.md,
# "Why the cluster is set up this way" and what was checked on this
# project's machine.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")

BASE=${PIPETTE_SLURM_BASE:-/tmp/pipette-slurm}
NODES=${SLURM_LOCAL_NODES:-4}
GPUS=${SLURM_LOCAL_GPUS:-8}
CPUS=${SLURM_LOCAL_CPUS:-$GPUS}       # = GPUs, so plain srun -N2 -n16 gives 8+8
MEM=${SLURM_LOCAL_MEM:-4000}
CTLD_PORT=${SLURM_LOCAL_CTLD_PORT:-16817}   # away from Slurm's 6817-6819
PORT_BASE=${SLURM_LOCAL_PORT_BASE:-17000}   # node i listens on PORT_BASE+i
MODE=${SLURM_LOCAL_MODE:-loopback}
SUBNET=${SLURM_LOCAL_SUBNET:-10.250.0}
INSTALL=${SLURM_LOCAL_INSTALL:-1}
HOSTS=${SLURM_LOCAL_HOSTS:-1}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}          # seconds to wait for idle nodes
CGROUP_PLUGIN=${SLURM_LOCAL_CGROUP_PLUGIN:-cgroup/v1}  # see README.md: works without any cgroup mount
MARK='# pipette-slurm-local'
CTL_NS=pipctl
NODE_NS_PREFIX=pipnode

CONF=$BASE/etc/slurm.conf

die() { echo "slurm-local: $*" >&2; exit 1; }
say() { echo "slurm-local: $*" >&2; }

check_args() {
    case $BASE in /*) ;; *) die "PIPETTE_SLURM_BASE must be absolute: $BASE" ;; esac
    [ "$BASE" != / ] || die "PIPETTE_SLURM_BASE must not be /"
    case $MODE in loopback|netns) ;; *) die "SLURM_LOCAL_MODE must be loopback or netns, not '$MODE'" ;; esac
    local v
    for v in NODES GPUS CPUS MEM CTLD_PORT PORT_BASE TIMEOUT; do
        [[ ${!v} =~ ^[0-9]+$ ]] || die "SLURM_LOCAL_$v must be a number, not '${!v}'"
    done
    if [ "$NODES" -lt 1 ] || [ "$NODES" -gt 200 ]; then die "SLURM_LOCAL_NODES must be 1..200"; fi
    if [ "$GPUS" -lt 1 ] || [ "$GPUS" -gt 64 ]; then die "SLURM_LOCAL_GPUS must be 1..64"; fi
    [[ $SUBNET =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "SLURM_LOCAL_SUBNET must be like 10.250.0"
}

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (daemons, mknod, /etc/hosts)"; }

# ---- packages -----------------------------------------------------------
pkg_ok() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

ensure_packages() {
    local want=(slurmctld slurmd slurm-client munge) missing=() p
    [ "$MODE" = netns ] && want+=(iproute2)
    for p in "${want[@]}"; do pkg_ok "$p" || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$INSTALL" = 1 ] || die "missing packages: ${missing[*]} (SLURM_LOCAL_INSTALL=0)"
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || die "apt-get update failed"
    # Debian's maintainer scripts try to start the services; without systemd
    # that fails harmlessly ("policy-rc.d denied execution") or starts the
    # system munged on its own socket, which we do not use.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
        || die "apt-get install ${missing[*]} failed"
}

# ---- processes ----------------------------------------------------------
# The binary a daemon must be running, resolved through Debian's alternatives
# (/usr/sbin/slurmd -> /usr/sbin/slurmd-wlm).
bin_of() { readlink -f "$(command -v "$1")"; }

# pid_of PIDFILE BINARY: print the PID if the file names a live process whose
# /proc/PID/exe is BINARY (a recycled PID running something else is ignored).
pid_of() {
    local f=$1 expect=$2 pid exe
    [ -r "$f" ] || return 1
    pid=$(tr -dc 0-9 < "$f")
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    exe=${exe% (deleted)}
    [ "$exe" = "$expect" ] || return 1
    echo "$pid"
}

munged_pid()    { pid_of "$BASE/munge/munged.pid" "$(bin_of munged)"; }
slurmctld_pid() { pid_of "$BASE/run/slurmctld.pid" "$(bin_of slurmctld)"; }
slurmd_pid()    { pid_of "$BASE/run/slurmd-node$1.pid" "$(bin_of slurmd)"; }

# Node count of the cluster that is (or was last) running, for stop/status.
recorded_nodes() { cat "$BASE/run/nodes" 2>/dev/null || echo "$NODES"; }
recorded_mode()  { cat "$BASE/run/mode" 2>/dev/null || echo "$MODE"; }

any_running() {
    local i n; n=$(recorded_nodes)
    munged_pid >/dev/null && return 0
    slurmctld_pid >/dev/null && return 0
    for ((i = 1; i <= n; i++)); do slurmd_pid "$i" >/dev/null && return 0; done
    return 1
}

# Run a Slurm client command against this cluster (in the controller's
# namespace in netns mode, so that the nodes can reach srun).
client() {
    if [ "$(recorded_mode)" = netns ]; then
        [ -e /var/run/netns/$CTL_NS ] || die "netns $CTL_NS is missing (cluster not started?)"
        SLURM_CONF=$CONF nsenter --net=/var/run/netns/$CTL_NS "$@"
    else
        SLURM_CONF=$CONF "$@"
    fi
}

# ---- configuration ------------------------------------------------------
node_addr() {
    if [ "$MODE" = netns ]; then echo "$SUBNET.$((10 + $1))"; else echo 127.0.0.1; fi
}

short_host() { local h; h=$(uname -n); echo "${h%%.*}"; }

subst() {
    sed -e "s|@BASE@|$BASE|g" -e "s|@CTL_HOST@|$CTL_HOST|g" \
        -e "s|@CTL_ADDR@|$CTL_ADDR|g" -e "s|@CTLD_PORT@|$CTLD_PORT|g" \
        -e "s|@CGROUP_PLUGIN@|$CGROUP_PLUGIN|g" "$1"
}

# Write all configuration files into directory $1.
render_config() {
    local d=$1 i last
    CTL_HOST=$(short_host)
    if [ "$MODE" = netns ]; then CTL_ADDR=$SUBNET.1; else CTL_ADDR=127.0.0.1; fi
    last=$((GPUS - 1))
    mkdir -p "$d"
    {
        subst "$HERE/slurm.conf.in"
        echo
        echo "# nodes: mode=$MODE"
        for ((i = 1; i <= NODES; i++)); do
            local nh=$CTL_HOST
            [ "$MODE" = netns ] && nh=node$i
            echo "NodeName=node$i NodeHostname=$nh NodeAddr=$(node_addr "$i") Port=$((PORT_BASE + i)) CPUs=$CPUS RealMemory=$MEM Gres=gpu:$GPUS State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP"
    } > "$d/slurm.conf"
    {
        subst "$HERE/gres.conf.in"
        for ((i = 1; i <= NODES; i++)); do
            if [ "$last" -eq 0 ]; then
                echo "NodeName=node$i Name=gpu File=$BASE/dev/node$i/nvidia0 Flags=nvidia_gpu_env"
            else
                echo "NodeName=node$i Name=gpu File=$BASE/dev/node$i/nvidia[0-$last] Flags=nvidia_gpu_env"
            fi
        done
    } > "$d/gres.conf"
    subst "$HERE/plugstack.conf.in" > "$d/plugstack.conf"
    subst "$HERE/cgroup.conf.in" > "$d/cgroup.conf"
}

# SLURM_LOCAL_PLUGSTACK: set and non-empty -> that line in 00-slurm-local.conf;
# set and empty -> the file is removed; unset -> left as it is.
apply_plugstack() {
    local f=$BASE/etc/plugstack.conf.d/00-slurm-local.conf
    mkdir -p "$BASE/etc/plugstack.conf.d"
    if [ -n "${SLURM_LOCAL_PLUGSTACK+set}" ]; then
        if [ -n "$SLURM_LOCAL_PLUGSTACK" ]; then
            printf '%s\n' "$SLURM_LOCAL_PLUGSTACK" > "$f.tmp" && mv "$f.tmp" "$f"
        else
            rm -f "$f"
        fi
    fi
}

# Fingerprint of everything that needs a daemon restart when it changes.
fingerprint() {
    {
        echo "mode=$MODE nodes=$NODES"
        cat "$1"/slurm.conf "$1"/gres.conf "$1"/plugstack.conf "$1"/cgroup.conf
        cat "$BASE/etc/plugstack.conf.d/00-slurm-local.conf" 2>/dev/null || true
    } | sha256sum | cut -d' ' -f1
}

make_devices() {
    local i g f
    for ((i = 1; i <= NODES; i++)); do
        mkdir -p "$BASE/dev/node$i"
        for ((g = 0; g < GPUS; g++)); do
            f=$BASE/dev/node$i/nvidia$g
            [ -c "$f" ] && continue
            rm -f "$f"
            # Same numbers as /dev/null: opening one is harmless. Slurm only
            # accepts character/block devices in gres.conf File=.
            mknod -m 0666 "$f" c 1 3 || die "mknod $f failed (needs CAP_MKNOD)"
        done
    done
}

# ---- /etc/hosts ---------------------------------------------------------
# The /etc/hosts lines of this cluster end with "$MARK $BASE", so that two
# clusters (two bases) can run side by side and one's stop leaves the
# other's names resolving; the first line for a name wins, and in loopback
# mode every cluster maps nodeN to the same address anyway.
hosts_tag() { echo "$MARK $BASE"; }

hosts_ours() {
    local line tag; tag=$(hosts_tag)
    while IFS= read -r line; do
        [ "${line%" $tag"}" != "$line" ] && echo "$line"
    done < /etc/hosts
    return 0
}

hosts_remove() {
    [ -w /etc/hosts ] || return 0
    [ -n "$(hosts_ours)" ] || return 0
    local t line tag; tag=$(hosts_tag)
    t=$(mktemp)
    while IFS= read -r line; do
        [ "${line%" $tag"}" = "$line" ] && printf '%s\n' "$line"
    done < /etc/hosts > "$t"
    cat "$t" > /etc/hosts      # in place: /etc/hosts may be a bind mount
    rm -f "$t"
}

hosts_add() {
    [ "$HOSTS" = 1 ] || return 0
    [ -w /etc/hosts ] || { say "warning: /etc/hosts is not writable; node names will not resolve"; return 0; }
    local i want t
    want=$(for ((i = 1; i <= NODES; i++)); do echo "$(node_addr "$i") node$i $(hosts_tag)"; done)
    [ "$(hosts_ours)" = "$want" ] && return 0
    hosts_remove
    # Before any other cluster's lines (the newest cluster's names win, as
    # netns mode needs), after everything else (localhost keeps 127.0.0.1).
    local line done=0
    t=$(mktemp)
    while IFS= read -r line; do
        if [ $done = 0 ] && [ "${line#*"$MARK "}" != "$line" ]; then
            echo "$want"; done=1
        fi
        printf '%s\n' "$line"
    done < /etc/hosts > "$t"
    [ $done = 1 ] || echo "$want" >> "$t"
    cat "$t" > /etc/hosts
    rm -f "$t"
}

# ---- network namespaces (netns mode) ------------------------------------
netns_up() {
    local i ns
    command -v ip >/dev/null || die "netns mode needs iproute2 (ip)"
    if [ ! -e /var/run/netns/$CTL_NS ]; then
        ip netns add $CTL_NS
        ip -n $CTL_NS link set lo up
        ip -n $CTL_NS link add br0 type bridge
        ip -n $CTL_NS addr add "$SUBNET.1/24" dev br0
        ip -n $CTL_NS link set br0 up
    fi
    for ((i = 1; i <= NODES; i++)); do
        ns=$NODE_NS_PREFIX$i
        [ -e "/var/run/netns/$ns" ] && continue
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        ip -n $CTL_NS link add "vn$i" type veth peer name eth0 netns "$ns"
        ip -n $CTL_NS link set "vn$i" master br0 up
        ip -n "$ns" addr add "$SUBNET.$((10 + i))/24" dev eth0
        ip -n "$ns" link set eth0 up
    done
}

netns_down() {
    local ns
    command -v ip >/dev/null || return 0
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case $ns in "$CTL_NS"|"$NODE_NS_PREFIX"[0-9]*) ip netns del "$ns" || true ;; esac
    done
}

# ---- daemons ------------------------------------------------------------
start_munged() {
    munged_pid >/dev/null && return 0
    install -d -m 0755 -o munge -g munge "$BASE/munge"
    if [ ! -s "$BASE/munge/munge.key" ]; then
        mungekey --create --keyfile="$BASE/munge/munge.key" || die "mungekey failed"
    fi
    chown munge:munge "$BASE/munge/munge.key"
    chmod 0400 "$BASE/munge/munge.key"
    rm -f "$BASE/munge/munge.socket" "$BASE/munge/munge.socket.lock"
    # The socket directory must be world-executable, or clients get
    # "Socket is inaccessible".
    runuser -u munge -- munged --socket="$BASE/munge/munge.socket" \
        --key-file="$BASE/munge/munge.key" --pid-file="$BASE/munge/munged.pid" \
        --seed-file="$BASE/munge/munged.seed" --log-file="$BASE/munge/munged.log" \
        </dev/null >>"$BASE/log/munged.out" 2>&1 9>&- \
        || { tail -n 20 "$BASE/munge/munged.log" >&2 2>/dev/null; die "munged failed to start"; }
}

# in_node_ns NAME CMD...: run CMD in the node's namespace (netns mode) with
# its own UTS hostname. Not `ip netns exec`: it remounts /sys, and slurmd then
# finds no cgroup filesystem.
in_ns() {
    local ns=$1 name=$2; shift 2
    if [ "$MODE" = netns ]; then
        # shellcheck disable=SC2016
        nsenter --net=/var/run/netns/"$ns" unshare --uts \
            sh -c 'echo "$0" > /proc/sys/kernel/hostname && exec "$@"' "$name" "$@"
    else
        "$@"
    fi
}

rotate_log() { if [ -s "$1" ]; then mv -f "$1" "$1.1"; fi; }

start_slurmctld() {
    slurmctld_pid >/dev/null && return 0
    rotate_log "$BASE/log/slurmctld.log"
    # -c: clear the saved job state, so every start begins with an empty queue.
    in_ns $CTL_NS "$(short_host)" slurmctld -c -f "$CONF" \
        </dev/null >>"$BASE/log/slurmctld.out" 2>&1 9>&- \
        || { log_tail; die "slurmctld failed to start"; }
}

start_slurmd() {
    local i=$1
    slurmd_pid "$i" >/dev/null && return 0
    mkdir -p "$BASE/spool/node$i"
    rotate_log "$BASE/log/slurmd-node$i.log"
    in_ns "$NODE_NS_PREFIX$i" "node$i" slurmd -f "$CONF" -N "node$i" \
        </dev/null >>"$BASE/log/slurmd-node$i.out" 2>&1 9>&- \
        || { log_tail; die "slurmd for node$i failed to start"; }
}

log_tail() {
    local f
    for f in "$BASE/munge/munged.log" "$BASE/log/slurmctld.log" "$BASE/log/"slurmd-node*.log "$BASE/log/"*.out; do
        [ -s "$f" ] || continue
        echo "==== tail $f" >&2
        tail -n 25 "$f" >&2
    done
}

# Wait until all nodes are idle; fail early when a daemon died.
wait_idle() {
    local deadline=$((SECONDS + TIMEOUT)) out n i
    while :; do
        out=$(client sinfo -h -N -o '%N %T' 2>/dev/null || true)
        n=$(printf '%s\n' "$out" | awk '$2 == "idle"' | wc -l)
        [ "$n" -eq "$NODES" ] && return 0
        slurmctld_pid >/dev/null || { log_tail; die "slurmctld is not running"; }
        for ((i = 1; i <= NODES; i++)); do
            slurmd_pid "$i" >/dev/null || { log_tail; die "slurmd for node$i is not running"; }
        done
        if [ $SECONDS -ge $deadline ]; then
            client sinfo -N -o '%N %T %E' >&2 || true
            log_tail
            die "nodes not idle after ${TIMEOUT}s ($n of $NODES idle)"
        fi
        sleep 0.2
    done
}

# ---- subcommands --------------------------------------------------------
cmd_start() {
    need_root
    ensure_packages
    mkdir -p "$BASE"/{etc,state,spool,log,run,dev}
    chmod 0755 "$BASE"
    exec 9>"$BASE/run/lock"
    flock 9

    # A cluster of another mode must go first (its namespaces, its addresses).
    if any_running && [ "$(recorded_mode)" != "$MODE" ]; then
        say "mode changed ($(recorded_mode) -> $MODE): stopping the old cluster"
        do_stop
    fi

    apply_plugstack
    rm -rf "$BASE/etc.new"
    render_config "$BASE/etc.new"
    local want have
    want=$(fingerprint "$BASE/etc.new")
    have=$(cat "$BASE/run/fingerprint" 2>/dev/null || true)
    if [ "$want" != "$have" ] && any_running; then
        say "configuration changed: restarting the daemons"
        do_stop
    fi
    local f
    for f in slurm.conf gres.conf plugstack.conf cgroup.conf; do
        mv -f "$BASE/etc.new/$f" "$BASE/etc/$f"
    done
    rmdir "$BASE/etc.new"
    echo "$want" > "$BASE/run/fingerprint"
    echo "$MODE" > "$BASE/run/mode"
    echo "$NODES" > "$BASE/run/nodes"

    if ! any_running; then
        # A fresh start: set the old logs aside so a failure shows only its own.
        local l
        for l in "$BASE/log/"*.log "$BASE/log/"*.out "$BASE/munge/munged.log"; do rotate_log "$l"; done
    fi
    make_devices
    hosts_add
    [ "$MODE" = netns ] && netns_up
    start_munged
    start_slurmctld
    local i
    for ((i = 1; i <= NODES; i++)); do start_slurmd "$i"; done
    wait_idle
}

# Stop what the pid files name; never by process name.
do_stop() {
    local n i pids=() p deadline
    n=$(recorded_nodes)
    if slurmctld_pid >/dev/null; then
        local ids
        ids=$(client squeue -h -o %i 2>/dev/null || true)
        if [ -n "$ids" ]; then
            # shellcheck disable=SC2086
            client scancel $ids 2>/dev/null || true
            deadline=$((SECONDS + 15))
            while [ -n "$(client squeue -h -o %i 2>/dev/null || true)" ] && [ $SECONDS -lt $deadline ]; do
                sleep 0.2
            done
        fi
    fi
    # slurmd first (in parallel), then slurmctld, then munged.
    local group
    for group in slurmd slurmctld munged; do
        pids=()
        case $group in
            slurmd) for ((i = 1; i <= n; i++)); do p=$(slurmd_pid "$i") && pids+=("$p:slurmd"); done ;;
            slurmctld) p=$(slurmctld_pid) && pids+=("$p:slurmctld") ;;
            munged) p=$(munged_pid) && pids+=("$p:munged") ;;
        esac
        [ ${#pids[@]} -eq 0 ] && continue
        for p in "${pids[@]}"; do kill -TERM "${p%%:*}" 2>/dev/null || true; done
        deadline=$((SECONDS + 10))
        for p in "${pids[@]}"; do
            while is_pid_bin "${p%%:*}" "${p#*:}" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
            if is_pid_bin "${p%%:*}" "${p#*:}"; then
                say "${p#*:} (pid ${p%%:*}) ignored SIGTERM; sending SIGKILL"
                kill -KILL "${p%%:*}" 2>/dev/null || true
            fi
        done
    done
    rm -f "$BASE/run/fingerprint"
}

# is_pid_bin PID NAME: PID is alive and runs the binary of NAME.
is_pid_bin() {
    local exe
    [ -d "/proc/$1" ] || return 1
    exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
    [ "${exe% (deleted)}" = "$(bin_of "$2")" ]
}

cmd_stop() {
    need_root
    if [ -d "$BASE/run" ]; then
        exec 9>"$BASE/run/lock"
        flock 9
        do_stop
    fi
    [ "$(recorded_mode)" = netns ] && netns_down
    hosts_remove
    return 0
}

cmd_status() {
    local n i rc=0 p
    n=$(recorded_nodes)
    if p=$(munged_pid); then echo "munged     running (pid $p)"; else echo "munged     stopped"; rc=1; fi
    if p=$(slurmctld_pid); then echo "slurmctld  running (pid $p)"; else echo "slurmctld  stopped"; rc=1; fi
    for ((i = 1; i <= n; i++)); do
        if p=$(slurmd_pid "$i"); then echo "slurmd     node$i running (pid $p)"; else echo "slurmd     node$i stopped"; rc=1; fi
    done
    echo "mode       $(recorded_mode)"
    [ $rc -eq 0 ] && client sinfo -N -o '%N %T %c %G'
    return $rc
}

cmd_env() {
    echo "export PIPETTE_SLURM_BASE='$BASE'"
    echo "export SLURM_CONF='$CONF'"
    echo "export SLURM_LOCAL_PLUGSTACK_DIR='$BASE/etc/plugstack.conf.d'"
    if [ "$(recorded_mode)" = netns ]; then
        echo "export SLURM_LOCAL_EXEC='nsenter --net=/var/run/netns/$CTL_NS'"
    else
        echo "export SLURM_LOCAL_EXEC=''"
    fi
}

# listening_ports: every local TCP port in LISTEN state (IPv4 and IPv6), one
# per line, from /proc/net/tcp{,6} (state 0A; the port is hex after the colon).
listening_ports() {
    local f local_addr st
    for f in /proc/net/tcp /proc/net/tcp6; do
        [ -r "$f" ] || continue
        while read -r _ local_addr _ st _; do
            if [ "$st" = 0A ]; then echo $((16#${local_addr##*:})); fi
        done < <(tail -n +2 "$f")
    done | sort -un
}

# free_block FROM COUNT TAKEN: the first port >= FROM such that COUNT ports
# from it are neither listening nor in TAKEN (a space-separated list).
free_block() {
    local p=$1 n=$2 taken=" $3 " k ok
    while [ "$p" -lt 65000 ]; do
        ok=1
        for ((k = 0; k < n; k++)); do
            case $taken in *" $((p + k)) "*) ok=0; break ;; esac
        done
        [ $ok = 1 ] && { echo "$p"; return 0; }
        p=$((p + k + 1))
    done
    die "no $n free TCP ports above $1"
}

# A cluster of its own: a fresh base directory and ports nothing listens on,
# so that a test run never joins a cluster another checkout started (its
# plugstack names another build of the plugin).  Prints export lines for
# PIPETTE_SLURM_BASE, SLURM_LOCAL_CTLD_PORT and SLURM_LOCAL_PORT_BASE.
cmd_private() {
    local base taken ctld nb
    base=$(mktemp -d /tmp/pipette-slurm.XXXXXX) || die "mktemp failed"
    chmod 0755 "$base"
    taken=$(listening_ports | tr '\n' ' ')
    ctld=$(free_block 16817 1 "$taken")
    nb=$(free_block 17000 $((NODES + 1)) "$taken $ctld")
    echo "export PIPETTE_SLURM_BASE='$base'"
    echo "export SLURM_LOCAL_CTLD_PORT=$ctld"
    echo "export SLURM_LOCAL_PORT_BASE=$nb"
}

cmd_clean() {
    cmd_stop
    [ -d "$BASE" ] || return 0
    # Only remove a directory that looks like ours.
    [ -f "$BASE/etc/slurm.conf" ] || [ -d "$BASE/run" ] || die "$BASE does not look like a slurm-local base; not removing it"
    rm -rf "$BASE"
}

check_args
case ${1:-} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    restart) need_root; [ -d "$BASE/run" ] && { exec 9>"$BASE/run/lock"; flock 9; do_stop; exec 9>&-; }; cmd_start ;;
    status) cmd_status ;;
    env) cmd_env ;;
    exec) shift; [ $# -gt 0 ] || die "usage: slurm-local.sh exec CMD [ARGS...]"
          if [ "$(recorded_mode)" = netns ]; then
              exec nsenter --net=/var/run/netns/$CTL_NS env SLURM_CONF="$CONF" "$@"
          else
              SLURM_CONF=$CONF exec "$@"
          fi ;;
    clean) cmd_clean ;;
    private) cmd_private ;;
    *) echo "usage: $0 start|stop|restart|status|env|exec CMD...|clean|private" >&2; exit 2 ;;
esac
