#!/usr/bin/env bash
# Prepare a single-node Slurm cluster for the tests marked `slurm`, as root on Debian 12; safe to run again.
#   1. installs Debian's slurm-wlm (22.05) and munge when missing;
#   2. writes /etc/slurm/slurm.conf: this host is controller and only compute node, one CPU-only partition;
#   3. starts munged, slurmctld and slurmd when they are down (restarts the Slurm daemons when the config changed);
#   4. waits until sinfo shows the node idle.
# The last line of stdout is the export the tests read, e.g.
#   eval "$(bash .ci/slurm-setup.sh | tail -1)"
set -euo pipefail

PARTITION=${MLCBENCH_SLURM_PARTITION:-cpu}
# Declared, not detected: slurmd takes these numbers as given (config_overrides), so a 2-core machine runs this many
# one-CPU array tasks at once. The tests' tasks mostly wait on subprocesses; oversubscribing is what we want here.
CPUS=${MLCBENCH_SLURM_CPUS:-8}
MEMORY_MB=${MLCBENCH_SLURM_MEMORY_MB:-16000}
CONF=/etc/slurm/slurm.conf
log() { echo "slurm-setup: $*" >&2; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    log "installing slurm-wlm and munge"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge >&2
fi

# slurmctld only starts on the host its config names, and slurmd looks its node up by the short hostname.
node=$(hostname -s)
mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
chown slurm:slurm /var/lib/slurm/slurmctld /var/log/slurm
new_conf=$(cat <<EOF
# Written by mlcbench's .ci/slurm-setup.sh: one host is controller and the only compute node.
ClusterName=mlcbench
SlurmctldHost=$node(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MaxArraySize=10001
MaxJobCount=50000
NodeName=$node NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEMORY_MB State=UNKNOWN
PartitionName=$PARTITION Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
)
conf_changed=0
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$new_conf" ]; then
    log "writing $CONF"
    printf '%s\n' "$new_conf" > "$CONF"
    conf_changed=1
fi

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge
if ! running /run/munge/munged.pid; then
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged
fi
for _ in $(seq 10); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 1; done
munge -n </dev/null | unmunge >/dev/null || { log "munge does not answer (see /var/log/munge/munged.log)"; exit 1; }

stop() {  # pid file of a daemon this script started
    running "$1" || return 0
    local pid; pid=$(cat "$1")
    kill "$pid"
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
    log "pid $pid did not stop"; exit 1
}
if [ "$conf_changed" = 1 ]; then
    stop /run/slurmd.pid
    stop /run/slurmctld.pid
fi
if ! running /run/slurmctld.pid; then
    log "starting slurmctld"
    slurmctld
fi
if ! running /run/slurmd.pid; then
    log "starting slurmd"
    slurmd
fi

state=""
for _ in $(seq 60); do
    state=$(sinfo --noheader --node "$node" --format %t 2>/dev/null || true)
    case "$state" in
        idle|mix|alloc) break ;;
        down*|drain*) scontrol update NodeName="$node" State=RESUME 2>/dev/null || true ;;
    esac
    sleep 1
done
case "$state" in
    idle|mix|alloc) log "node $node is $state in partition $PARTITION" ;;
    *) log "node $node is '${state:-not listed}' after 60 s (see /var/log/slurm/slurmctld.log and slurmd.log)"; exit 1 ;;
esac

echo "export MLCBENCH_TEST_SLURM_PARTITION=$PARTITION"
