#!/usr/bin/env bash
# A single-node SLURM on this machine, from Debian's packages (slurmctld, slurmd, munge), started without
# systemd: its own munge key and socket, config, state and logs in one folder, the daemons on 127.0.0.1 only.
#
#   scripts/slurm_local.sh start     # install (apt, as root) if missing, then start munged, slurmctld, slurmd
#   eval "$(scripts/slurm_local.sh env)"   # SLURM_CONF for this shell: sbatch, squeue, scancel, lfo ablate
#   scripts/slurm_local.sh status    # the daemons' pids and the node's state
#   scripts/slurm_local.sh stop      # stop the daemons (the folder stays, for the logs)
#
# LFO_SLURM_DIR (default /tmp/lfo-slurm) holds everything; LFO_SLURM_CPUS (default: nproc) is the node's CPUs;
# LFO_SLURM_PORT (default 6817) is slurmctld's port, slurmd takes the next one. Without accounting (no slurmdbd)
# `sacct` does not work: lfo reads job states from `squeue` and the cells' own markers instead.
set -euo pipefail

DIR=${LFO_SLURM_DIR:-/tmp/lfo-slurm}
CPUS=${LFO_SLURM_CPUS:-$(nproc)}
PORT=${LFO_SLURM_PORT:-6817}
NODE=lfo-node
CONF=$DIR/slurm.conf

say() { echo "slurm_local: $*" >&2; }
die() { echo "error: $*" >&2; exit 2; }

install_packages() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && return 0
  [ "$(id -u)" = 0 ] || die "slurmctld/munged are missing and installing them needs root: apt-get install slurm-wlm munge"
  say "installing Debian's slurm-wlm and munge"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null; }

write_conf() {
  mkdir -p "$DIR/state" "$DIR/spool"
  local mem
  mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
  cat > "$CONF.tmp" <<EOF
# Written by scripts/slurm_local.sh: one node, this machine, 127.0.0.1 only.
ClusterName=lfo
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/munge
AuthInfo=socket=$DIR/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MaxArraySize=10001
KillWait=5
MinJobAge=300
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$(hostname) CPUs=$CPUS RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$CONF.tmp" "$CONF"
}

start() {
  install_packages
  mkdir -p "$DIR"
  if [ ! -f "$DIR/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge.key.tmp" bs=1 count=1024 status=none
    chmod 400 "$DIR/munge.key.tmp" && mv "$DIR/munge.key.tmp" "$DIR/munge.key"
  fi
  write_conf
  if ! pid_alive "$DIR/munged.pid"; then
    munged --force --key-file="$DIR/munge.key" --socket="$DIR/munge.socket" --pid-file="$DIR/munged.pid" \
      --log-file="$DIR/munged.log" --seed-file="$DIR/munged.seed"
  fi
  export SLURM_CONF=$CONF
  if ! pid_alive "$DIR/slurmctld.pid"; then
    slurmctld -c -f "$CONF" || die "slurmctld did not start; see $DIR/slurmctld.log"
  fi
  if ! pid_alive "$DIR/slurmd.pid"; then
    slurmd -N "$NODE" -f "$CONF" || die "slurmd did not start; see $DIR/slurmd.log"
  fi
  for _ in $(seq 1 60); do
    state=$(sinfo -h -N -n "$NODE" -o '%t' 2>/dev/null || true)
    case "$state" in idle*|mix*|alloc*) say "up: node $NODE $state, $CPUS CPUs; SLURM_CONF=$CONF"; return 0;; esac
    sleep 0.5
  done
  die "the node did not become idle within 30 s (state '${state:-none}'); see $DIR/slurmctld.log and $DIR/slurmd.log"
}

stop() {
  for d in slurmd slurmctld munged; do
    if pid_alive "$DIR/$d.pid"; then
      kill "$(cat "$DIR/$d.pid" 2>/dev/null)" 2>/dev/null || true
    fi
  done
  for d in slurmd slurmctld munged; do
    for _ in $(seq 1 50); do pid_alive "$DIR/$d.pid" || break; sleep 0.1; done
    if pid_alive "$DIR/$d.pid"; then kill -9 "$(cat "$DIR/$d.pid")" 2>/dev/null || true; fi
    rm -f "$DIR/$d.pid"
  done
  say "stopped"
}

status() {
  local up=0
  for d in munged slurmctld slurmd; do
    if pid_alive "$DIR/$d.pid"; then echo "$d: running (pid $(cat "$DIR/$d.pid"))"; else echo "$d: stopped"; up=1; fi
  done
  [ "$up" = 0 ] && SLURM_CONF=$CONF sinfo -N -o '%N %t %c' 2>/dev/null || true
  return $up
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
