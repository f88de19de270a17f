#!/usr/bin/env bash
# Starts a single-node Slurm on this machine for the Slurm checks
# (scripts/slurm-smoke.sh, scripts/slurm-sweep-check.sh): munged, slurmctld
# and slurmd as root, with a slurm.conf of its own under DIR (default
# /tmp/headroom-slurm) and job requeue on. Prints the line to export
# (SLURM_CONF=DIR/slurm.conf). Does nothing when that Slurm already answers.
#
# Usage: scripts/slurm-local.sh [DIR]      stop: scripts/slurm-local.sh --stop [DIR]
set -euo pipefail

if [[ "${1:-}" == "--stop" ]]; then
  dir="${2:-/tmp/headroom-slurm}"
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do
    [[ -f "$pidfile" ]] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  exit 0
fi
dir="${1:-/tmp/headroom-slurm}"
export SLURM_CONF="$dir/slurm.conf"
if [[ -f "$SLURM_CONF" ]] && sinfo -h >/dev/null 2>&1; then
  echo "export SLURM_CONF=$SLURM_CONF"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "slurm-local: must run as root (slurmd starts jobs as their users)" >&2
  exit 1
fi
mkdir -p "$dir/state" "$dir/spool"
host="$(hostname -s)"
cpus="$(nproc)"
mem_mb="$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)"
cat >"$SLURM_CONF" <<CONF
ClusterName=headroom
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MpiDefault=none
ReturnToService=2
JobRequeue=1
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
# Quick turnaround for a test cluster: no minimum gap before a job's
# resources are reused.
MinJobAge=300
DefMemPerCPU=2048
KillWait=10
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
if ! pgrep -x munged >/dev/null; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged
fi
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 30); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 1
done
echo "slurm-local: the node did not come up; see $dir/slurmctld.log and $dir/slurmd.log" >&2
exit 1
