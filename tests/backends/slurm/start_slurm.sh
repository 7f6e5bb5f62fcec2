#!/usr/bin/env bash
# Start a throw-away, single-host Slurm 22.05 cluster (Debian bookworm) for automated tests.
#
# Usage:  start_slurm.sh [DIR]            (as root)
#   DIR   private directory for config/state/logs/fake GPU devices
#         (default: a fresh mktemp -d /tmp/slurmtest.XXXXXX)
# Env knobs:
#   SLURM_TEST_NODES=N      number of slurmd nodes (node1..nodeN, default 1); every node
#                           gets 8 fake GPUs (4 x a100, 4 x v100)
#   SLURM_TEST_GRES=split   instead, one GPU type a node: odd nodes 4 x a100, even nodes
#                           4 x v100 (a heterogeneous cluster: node1 a100, node2 v100)
#   SLURM_TEST_CPUS=N       CPUs advertised per node (default 64; faked via config_overrides)
#   SLURM_TEST_WAIT=S       seconds to wait for nodes to become idle (default 120)
#   SLURM_TEST_GRES_CORES=0 omit Cores= in gres.conf (gres strings then lack "(S:0)")
#   SLURM_TEST_CRED_EXPIRE  AuthInfo cred_expire (default 5 = minimum accepted by 22.05;
#                           a requeued job cannot restart before cred_expire+1 s)
#   SLURM_TEST_JWT=1        also enable auth/jwt (AuthAltTypes) so `scontrol token` works
#   SLURM_TEST_CLOUD=N      also N power-saving cloud nodes cloud1..cloudN (State=CLOUD
#                           Feature=pool_cloud, the same GPUs as the others): Slurm's
#                           ResumeProgram (DIR/power/resume.sh) starts a local slurmd for
#                           each node it is given, SuspendProgram (DIR/power/suspend.sh)
#                           stops it, both log to DIR/power/power.log; every node is in
#                           SuspendExcNodes: Slurm never powers one down by itself
#   SLURM_TEST_BOOT_S=S     seconds a cloud node takes to "boot" (ResumeProgram to slurmd
#                           start; default 3)
#   SLURM_TEST_RESTD_USER=U also start slurmrestd as (non-root) user U:
#                           unix socket DIR/rest/rest.sock (rest_auth/local), and with
#                           SLURM_TEST_JWT=1 additionally TCP 127.0.0.1:$(cat DIR/rest/port)
#
# On success prints "SLURM_CONF=<DIR>/slurm.conf" as the LAST line on stdout and writes
# <DIR>/env.sh (source it). Stop with: stop_slurm.sh DIR
set -euo pipefail

log() { echo "[start_slurm] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"

DIR="${1:-}"
if [ -z "$DIR" ]; then DIR="$(mktemp -d /tmp/slurmtest.XXXXXX)"; fi
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
NNODES="${SLURM_TEST_NODES:-1}"
NCLOUD="${SLURM_TEST_CLOUD:-0}"
BOOT_S="${SLURM_TEST_BOOT_S:-3}"
NCPUS="${SLURM_TEST_CPUS:-64}"
WAIT="${SLURM_TEST_WAIT:-120}"

# ---------------------------------------------------------------- 1. install
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
   || ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1 \
   || { [ -n "${SLURM_TEST_RESTD_USER:-}" ] && ! command -v slurmrestd >/dev/null 2>&1; }; then
    log "installing slurm-wlm + munge"
    export DEBIAN_FRONTEND=noninteractive
    PKGS="slurm-wlm slurmctld slurmd slurm-client munge"
    [ -n "${SLURM_TEST_RESTD_USER:-}" ] && PKGS="$PKGS slurmrestd"
    if ! apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends $PKGS >"$DIR/apt.log" 2>&1; then
        log "apt-get install failed; running apt-get update and retrying"
        apt-get update >>"$DIR/apt.log" 2>&1 || true
        apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends $PKGS >>"$DIR/apt.log" 2>&1 \
            || die "apt-get install failed, see $DIR/apt.log"
    fi
fi

# ---------------------------------------------------------------- 2. munge
# Private munged with its own socket + key so we never collide with a system munged.
MUNGE_DIR="$DIR/munge"
MUNGE_SOCK="$MUNGE_DIR/munge.socket"
mkdir -p "$MUNGE_DIR"
if ! getent passwd munge >/dev/null; then
    useradd --system --no-create-home --shell /usr/sbin/nologin munge
fi
if [ ! -s "$MUNGE_DIR/munge.key" ]; then
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --keyfile="$MUNGE_DIR/munge.key" --force >/dev/null
    else
        dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1 count=1024 status=none
    fi
fi
chown -R munge:munge "$MUNGE_DIR"
chmod 700 "$MUNGE_DIR"
chmod 400 "$MUNGE_DIR/munge.key"
if ! munge -n --socket="$MUNGE_SOCK" 2>/dev/null | unmunge --socket="$MUNGE_SOCK" >/dev/null 2>&1; then
    rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
    # munged refuses to run unless its key/socket dirs are owned by the running user.
    # --force: ignore "insecure" permission warnings on parent dirs (e.g. /tmp).
    runuser -u munge -- /usr/sbin/munged --force \
        --key-file="$MUNGE_DIR/munge.key" \
        --socket="$MUNGE_SOCK" \
        --pid-file="$MUNGE_DIR/munged.pid" \
        --log-file="$MUNGE_DIR/munged.log" \
        --seed-file="$MUNGE_DIR/munged.seed" \
        || die "munged failed to start, see $MUNGE_DIR/munged.log"
    for _ in $(seq 50); do
        munge -n --socket="$MUNGE_SOCK" 2>/dev/null | unmunge --socket="$MUNGE_SOCK" >/dev/null 2>&1 && break
        sleep 0.1
    done
fi
munge -n --socket="$MUNGE_SOCK" | unmunge --socket="$MUNGE_SOCK" >/dev/null || die "munge not working"
chmod 755 "$MUNGE_DIR"   # non-root clients (sbatch as a normal user) must reach the socket

# ---------------------------------------------------------------- 3. config
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
HOST="$(hostname -s)"
if [ -f "$DIR/ports" ]; then . "$DIR/ports"; else
    CTLD_PORT="$(free_port)"
    SLURMD_PORT_BASE="$(free_port)"
    echo "CTLD_PORT=$CTLD_PORT; SLURMD_PORT_BASE=$SLURMD_PORT_BASE" > "$DIR/ports"
fi
mkdir -p "$DIR/state" "$DIR/log" "$DIR/dev" "$DIR/run"
chmod 755 "$DIR"   # slurm.conf must be readable by non-root submitters

NODE_LINES=""; GRES_LINES=""; NODE_NAMES=""
# node1..nodeN, then the cloud nodes cloud1..cloudM (each with its own slurmd port)
ALL_NODES="$(seq -f 'node%g' 1 "$NNODES")"
[ "$NCLOUD" -gt 0 ] && ALL_NODES="$ALL_NODES $(seq -f 'cloud%g' 1 "$NCLOUD")"
i=0
for n in $ALL_NODES; do
    i=$((i + 1))
    NODE_NAMES="${NODE_NAMES:+$NODE_NAMES,}$n"
    mkdir -p "$DIR/spool/$n" "$DIR/dev/$n"
    for g in 0 1 2 3 4 5 6 7; do
        f="$DIR/dev/$n/nvidia$g"
        if [ ! -e "$f" ]; then
            # Fake GPU device nodes (major 195 = nvidia). If mknod is not permitted (no
            # CAP_MKNOD) symlink to /dev/null: File= must stat() as a char/block device -- with a
            # plain file slurmd logs "is not a valid character or block device" and jobs get an
            # EMPTY CUDA_VISIBLE_DEVICES (scheduling still works).
            mknod "$f" c 195 "$g" 2>/dev/null || ln -s /dev/null "$f"
        fi
    done
    PORT=$((SLURMD_PORT_BASE + i - 1))
    GRES="gpu:a100:4,gpu:v100:4"
    if [ "${SLURM_TEST_GRES:-mixed}" = split ]; then
        if [ $((i % 2)) = 1 ]; then t=a100; else t=v100; fi
        GRES="gpu:$t:4"
    fi
    STATE="State=UNKNOWN"
    case "$n" in cloud*) STATE="State=CLOUD Feature=pool_cloud" ;; esac
    NODE_LINES+="NodeName=$n NodeAddr=127.0.0.1 NodeHostname=$HOST Port=$PORT CPUs=$NCPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$NCPUS ThreadsPerCore=1 RealMemory=16000 Gres=$GRES $STATE"$'\n'
    if [ "${SLURM_TEST_GRES:-mixed}" = split ]; then
        GRES_LINES+="NodeName=$n Name=gpu Type=$t File=$DIR/dev/$n/nvidia[0-3] Cores=0-$((NCPUS-1))"$'\n'
    elif [ "${SLURM_TEST_GRES_CORES:-1}" = 1 ]; then
        # with Cores=, gres strings look like real autodetected nodes: gpu:a100:4(S:0)
        GRES_LINES+="NodeName=$n Name=gpu Type=a100 File=$DIR/dev/$n/nvidia[0-3] Cores=0-$((NCPUS-1))"$'\n'
        GRES_LINES+="NodeName=$n Name=gpu Type=v100 File=$DIR/dev/$n/nvidia[4-7] Cores=0-$((NCPUS-1))"$'\n'
    else
        GRES_LINES+="NodeName=$n Name=gpu Type=a100 File=$DIR/dev/$n/nvidia[0-3]"$'\n'
        GRES_LINES+="NodeName=$n Name=gpu Type=v100 File=$DIR/dev/$n/nvidia[4-7]"$'\n'
    fi
done

POWER_LINES=""
if [ "$NCLOUD" -gt 0 ]; then
    # Slurm's power saving, as a site with cloud nodes has it: the ResumeProgram stands
    # in for a cloud API (it starts a local slurmd for each node it is given), the
    # SuspendProgram stops it. Slurm 22.05 facts (checked here): SuspendTime=INFINITE
    # turns power saving off ("attempt to do power work on node but PowerSave is
    # disabled", POWER_UP refused), so SuspendTime is finite and every node is in
    # SuspendExcNodes: Slurm never powers a node down by itself (ilucid decides), while
    # `scontrol update NodeName=X State=POWER_DOWN|POWER_UP` still work on them.
    # PrivateData=cloud: without it sinfo and scontrol (even as root) do not show a
    # powered-down cloud node at all.
    mkdir -p "$DIR/power"
    cat > "$DIR/power/resume.sh" <<EOF
#!/bin/sh
# ResumeProgram: start a slurmd for each node of the host list Slurm gives; -b: it says
# it booted now, as a fresh cloud machine would (Slurm keeps a node POWERING_UP until its
# boot time is after the power-up request, and this host booted long ago)
export SLURM_CONF=$DIR/slurm.conf
# slurmctld runs this with no stdin/stdout/stderr: a slurmd started so would open its
# log as fd 0, lose it when it daemonizes, and hand slurmstepd broken pipes
exec </dev/null >>$DIR/power/power.log 2>&1
echo "\$(date +%s) resume \$1"
for n in \$(scontrol show hostnames "\$1"); do
    # a machine takes a while to boot: $BOOT_S s here, in the background (Slurm shows
    # the node POWERING_UP meanwhile); none once stop_slurm.sh has stopped slurmctld
    ( sleep $BOOT_S; [ -f $DIR/run/slurmctld.pid ] && slurmd -b -f $DIR/slurm.conf -N "\$n" ) &
done
EOF
    cat > "$DIR/power/suspend.sh" <<EOF
#!/bin/sh
# SuspendProgram: stop the slurmd of each node of the host list Slurm gives
export SLURM_CONF=$DIR/slurm.conf
exec </dev/null >>$DIR/power/power.log 2>&1
echo "\$(date +%s) suspend \$1"
for n in \$(scontrol show hostnames "\$1"); do
    f=$DIR/run/slurmd-\$n.pid
    [ -f "\$f" ] && kill -TERM "\$(cat "\$f")" 2>/dev/null
done
exit 0
EOF
    chmod 755 "$DIR/power/resume.sh" "$DIR/power/suspend.sh"
    POWER_LINES="ResumeProgram=$DIR/power/resume.sh
SuspendProgram=$DIR/power/suspend.sh
SuspendTime=60
SuspendExcNodes=$NODE_NAMES
PrivateData=cloud
ResumeTimeout=${SLURM_TEST_RESUME_TIMEOUT:-60}
SuspendTimeout=${SLURM_TEST_SUSPEND_TIMEOUT:-5}"
fi

cat > "$DIR/slurm.conf" <<EOF
# generated by start_slurm.sh
ClusterName=testcluster
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT_BASE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits (BeginTime) before it may restart
AuthInfo=socket=$MUNGE_SOCK,cred_expire=${SLURM_TEST_CRED_EXPIRE:-5}
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# NB: AccountingStorageTRES=gres/gpu is fatal without slurmdbd ("slurmdbd is required to run with TRES gres/gpu")
MailProg=/bin/true
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=2,bf_interval=1,default_queue_depth=1000
PreemptType=preempt/none
JobRequeue=1
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=30
MessageTimeout=5
InactiveLimit=0
KillWait=2
MinJobAge=300
Waittime=0
TCPTimeout=2
# keep the node from being drained when a job is slow to die
UnkillableStepTimeout=30
$NODE_LINES
$POWER_LINES
PartitionName=gpu Nodes=$NODE_NAMES Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF

if [ "${SLURM_TEST_JWT:-0}" = 1 ]; then
    [ -s "$DIR/jwt_hs256.key" ] || { dd if=/dev/urandom of="$DIR/jwt_hs256.key" bs=32 count=1 status=none; }
    chmod 600 "$DIR/jwt_hs256.key"
    printf 'AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=%s\n' "$DIR/jwt_hs256.key" >> "$DIR/slurm.conf"
fi

cat > "$DIR/gres.conf" <<EOF
AutoDetect=off
$GRES_LINES
EOF

cat > "$DIR/cgroup.conf" <<EOF
# not used (proctrack/linuxproc + task/none) but keeps slurmd from probing the default path
CgroupAutomount=no
ConstrainCores=no
ConstrainDevices=no
ConstrainRAMSpace=no
EOF
chmod 644 "$DIR"/*.conf

cat > "$DIR/env.sh" <<EOF
export SLURM_CONF=$DIR/slurm.conf
EOF
export SLURM_CONF="$DIR/slurm.conf"

# ---------------------------------------------------------------- 4. daemons
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

CTLD_RESTARTED=0
if ! pid_alive "$DIR/run/slurmctld.pid"; then
    log "starting slurmctld (port $CTLD_PORT)"
    CTLD_RESTARTED=1
    # daemonizes itself (no -D); state in $DIR/state is recovered automatically on restart
    slurmctld -f "$SLURM_CONF" || die "slurmctld failed, see $DIR/log/slurmctld.log"
fi
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.1; done
scontrol ping | grep -q 'is UP' || die "slurmctld not responding, see $DIR/log/slurmctld.log"

# slurmds that survived a slurmctld restart only re-register on their next ping (~5 s);
# a reconfigure makes them register immediately.
if [ "$CTLD_RESTARTED" = 1 ] && ls "$DIR"/run/slurmd-*.pid >/dev/null 2>&1; then
    scontrol reconfigure >/dev/null 2>&1 || true
fi
for i in $(seq 1 "$NNODES"); do
    n="node$i"
    if ! pid_alive "$DIR/run/slurmd-$n.pid"; then
        log "starting slurmd $n"
        slurmd -f "$SLURM_CONF" -N "$n" || die "slurmd $n failed, see $DIR/log/slurmd-$n.log"
    fi
done

deadline=$((SECONDS + WAIT))
nudge=$((SECONDS + 15))
while :; do
    # the ordinary nodes only: a cloud node stays powered down until it is asked up
    states="$(sinfo -h -N -o '%N %T' 2>/dev/null | awk '$1 !~ /^cloud/' || true)"
    notidle="$(echo "$states" | awk '$2!="idle" && $2!="mixed" && $2!="allocated"' )"
    if [ -n "$states" ] && [ -z "$notidle" ]; then break; fi
    if [ $SECONDS -ge $deadline ]; then
        log "nodes not idle after ${WAIT}s:"; echo "$states" >&2
        tail -n 20 "$DIR"/log/*.log >&2
        exit 1
    fi
    # on a loaded host a slurmd can miss its registration (node "unknown*"): every 15 s
    # start again any that died, and ask the others to register now
    if [ $SECONDS -ge $nudge ]; then
        nudge=$((SECONDS + 15))
        for n in $(echo "$notidle" | awk '{print $1}'); do
            if ! pid_alive "$DIR/run/slurmd-$n.pid"; then
                log "slurmd $n is gone: starting it again"
                slurmd -f "$SLURM_CONF" -N "$n" || true
            fi
        done
        scontrol reconfigure >/dev/null 2>&1 || true
    fi
    sleep 0.2
done
log "cluster up: $(echo "$states" | tr '\n' ' ')"

if [ -n "${SLURM_TEST_RESTD_USER:-}" ]; then
    U="$SLURM_TEST_RESTD_USER"
    getent passwd "$U" >/dev/null || useradd -m -s /bin/bash "$U"
    mkdir -p "$DIR/rest"; chown "$U" "$DIR/rest"
    # slurmrestd refuses to run as root; -s openapi/v0.0.38 avoids the dbv0.0.38 plugin, which
    # is fatal without slurmdbd ("slurm not configured with slurmdbd").
    if ! pid_alive "$DIR/run/slurmrestd-local.pid"; then
        rm -f "$DIR/rest/rest.sock"
        runuser -u "$U" -- env SLURM_CONF="$SLURM_CONF" setsid slurmrestd -a rest_auth/local \
            -s openapi/v0.0.38 "unix:$DIR/rest/rest.sock" >"$DIR/log/slurmrestd-local.log" 2>&1 &
        echo $! > "$DIR/run/slurmrestd-local.pid"
    fi
    if [ "${SLURM_TEST_JWT:-0}" = 1 ] && ! pid_alive "$DIR/run/slurmrestd-jwt.pid"; then
        [ -s "$DIR/rest/port" ] || free_port > "$DIR/rest/port"
        # SLURM_JWT=daemon is required, else "Rejecting thread config token for user X"
        runuser -u "$U" -- env SLURM_CONF="$SLURM_CONF" SLURM_JWT=daemon setsid slurmrestd \
            -a rest_auth/jwt -s openapi/v0.0.38 "127.0.0.1:$(cat "$DIR/rest/port")" \
            >"$DIR/log/slurmrestd-jwt.log" 2>&1 &
        echo $! > "$DIR/run/slurmrestd-jwt.pid"
    fi
    for _ in $(seq 50); do [ -S "$DIR/rest/rest.sock" ] && break; sleep 0.1; done
    [ -S "$DIR/rest/rest.sock" ] || die "slurmrestd failed, see $DIR/log/slurmrestd-local.log"
    if [ "${SLURM_TEST_JWT:-0}" = 1 ]; then
        log "slurmrestd (as $U): unix:$DIR/rest/rest.sock and http://127.0.0.1:$(cat "$DIR/rest/port")"
    else
        log "slurmrestd (as $U): unix:$DIR/rest/rest.sock"
    fi
fi
echo "SLURM_CONF=$SLURM_CONF"
