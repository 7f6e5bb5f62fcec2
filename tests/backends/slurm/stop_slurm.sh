#!/usr/bin/env bash
# Stop the daemons started by start_slurm.sh DIR (slurmd(s), cloud nodes' slurmd(s) that
# its ResumeProgram started, slurmctld, private munged).
# Usage: stop_slurm.sh DIR [--purge|--keep-jobs]
#   --purge      also delete DIR
#   --keep-jobs  do not scancel jobs first (state in DIR/state is kept either way; a later
#                start_slurm.sh DIR recovers pending/held jobs; running jobs' slurmstepd
#                processes are killed regardless)
set -uo pipefail
DIR="${1:?usage: stop_slurm.sh DIR [--purge|--keep-jobs]}"
DIR="$(cd "$DIR" && pwd)" || exit 1

kill_pidfile() {  # pidfile [timeout_s]
    local f="$1" t="${2:-10}" pid
    [ -f "$f" ] || return 0
    pid="$(cat "$f" 2>/dev/null)"; [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq $((t * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    rm -f "$f"
}

# cancel jobs first so slurmstepd / job processes go away cleanly
if [ -f "$DIR/slurm.conf" ] && [ "${2:-}" != "--keep-jobs" ]; then
    SLURM_CONF="$DIR/slurm.conf" timeout 5 scancel --full --signal=KILL -u root >/dev/null 2>&1 || true
    SLURM_CONF="$DIR/slurm.conf" timeout 5 scancel $(SLURM_CONF="$DIR/slurm.conf" timeout 5 squeue -h -o %i 2>/dev/null) >/dev/null 2>&1 || true
fi
for f in "$DIR"/run/slurmrestd-*.pid; do [ -e "$f" ] && kill_pidfile "$f" 5; done
for f in "$DIR"/run/slurmd-*.pid; do [ -e "$f" ] && kill_pidfile "$f" 10; done
kill_pidfile "$DIR/run/slurmctld.pid" 10
# a cloud node's slurmd that the ResumeProgram started while the above ran, and any whose
# pid file is gone: every slurmd of this cluster is run with -f DIR/slurm.conf
for f in "$DIR"/run/slurmd-*.pid; do [ -e "$f" ] && kill_pidfile "$f" 10; done
for p in $(pgrep -x slurmd 2>/dev/null); do
    if tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -qF -- "-f $DIR/slurm.conf "; then
        kill -KILL "$p" 2>/dev/null
    fi
done
kill_pidfile "$DIR/munge/munged.pid" 5
# leftover slurmstepd processes belonging to this cluster (matched by our private spool dir)
for p in $(pgrep -x slurmstepd 2>/dev/null); do
    if tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q "$DIR" || \
       ls -l /proc/$p/cwd 2>/dev/null | grep -q "$DIR"; then kill -KILL "$p" 2>/dev/null; fi
done
if [ "${2:-}" = "--purge" ]; then rm -rf "$DIR"; fi
echo "[stop_slurm] stopped ($DIR)"
