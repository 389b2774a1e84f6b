#!/usr/bin/env bash
# A throw-away SLURM cluster on this one host, for the slurm_gate tests and for trying the gate by hand:
# a private munged (own key and socket), one slurmctld and N slurmd (`slurmd -N nodeK`, Debian's slurm-wlm
# is built with MULTIPLE_SLURMD), everything under DIR (but its Unix sockets: a short /tmp/hydra-slurm.*, which
# stop removes), no /etc/slurm or /run/munge touched.
#
#   slurm_cluster.sh start DIR [NODES=4] [BASE_PORT=17000]   # prints SLURM_CONF=DIR/slurm.conf
#   slurm_cluster.sh stop DIR
#
# Ports BASE_PORT (slurmctld) and BASE_PORT+1..BASE_PORT+NODES (slurmd) must be free. Needs root (slurmd).
set -euo pipefail

die() { echo "slurm_cluster.sh: $*" >&2; exit 1; }

start() {
  local dir=$1 nodes=${2:-4} base=${3:-17000}
  [[ $nodes =~ ^[1-9][0-9]*$ ]] || die "NODES must be a positive integer, got '$nodes'"
  [[ $base =~ ^[1-9][0-9]*$ ]] || die "BASE_PORT must be a positive integer, got '$base'"
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    die "slurmctld or munged not installed (apt-get install slurm-wlm munge)"
  fi
  mkdir -p "$dir"/{munge,state,log,run}
  dir=$(cd "$dir" && pwd)
  # The Unix sockets (munged's, and slurmstepd's <node>_<job>.<step> in the spool directory) go in a short directory
  # of their own: under a deep DIR (a pytest temp dir) their paths pass the 108-byte limit and every job launch
  # fails ("launch failed requeued held"). DIR/sockets.path names it, so that stop removes it.
  local sockets
  sockets=$(mktemp -d /tmp/hydra-slurm.XXXXXX)
  mkdir "$sockets/spool"
  chmod 755 "$sockets"
  echo "$sockets" >"$dir/sockets.path"
  chmod 755 "$dir" "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || { head -c 1024 /dev/urandom >"$dir/munge/munge.key"; chmod 600 "$dir/munge/munge.key"; }
  /usr/sbin/munged --force --socket="$sockets/munge.sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed"

  local conf=$dir/slurm.conf
  # MessageTimeout and BatchStartTimeout above their 10 s defaults: a loaded 2-core CI machine can be slower.
  cat >"$conf" <<EOF
ClusterName=hydratest
SlurmctldHost=localhost
SlurmctldPort=$base
AuthType=auth/munge
AuthInfo=socket=$sockets/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$sockets/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmdTimeout=300
MessageTimeout=60
BatchStartTimeout=120
EOF
  local k
  for k in $(seq 1 "$nodes"); do
    echo "NodeName=node$k NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + k)) CPUs=1 RealMemory=1000" >>"$conf"
  done
  echo "PartitionName=gpu Nodes=node[1-$nodes] Default=YES MaxTime=INFINITE State=UP" >>"$conf"

  export SLURM_CONF=$conf
  slurmctld
  for k in $(seq 1 "$nodes"); do slurmd -N "node$k"; done
  # Ready when every node has registered (idle) with the controller.
  for _ in $(seq 1 100); do
    if [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" -eq "$nodes" ]; then
      echo "SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.2
  done
  die "nodes did not come up idle within 20 s; see $dir/log"
}

stop() {
  local dir=$1 pidfile pid
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/slurm.conf" ]; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scontrol shutdown >/dev/null 2>&1 || true
  fi
  # Whatever did not go down with `scontrol shutdown` (or never registered) is stopped by its own pid file.
  for pidfile in "$dir"/run/*.pid "$dir/munge/munged.pid"; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || continue
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; kill "$pid" 2>/dev/null || true; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  done
  if [ -f "$dir/sockets.path" ]; then
    case $(cat "$dir/sockets.path") in /tmp/hydra-slurm.*) rm -rf "$(cat "$dir/sockets.path")" ;; esac
    rm -f "$dir/sockets.path"
  fi
  return 0
}

case "${1:-}" in
  start) [ $# -ge 2 ] || die "usage: $0 start DIR [NODES] [BASE_PORT]"; start "$2" "${3:-4}" "${4:-17000}" ;;
  stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
  *) die "usage: $0 start DIR [NODES] [BASE_PORT] | stop DIR" ;;
esac
