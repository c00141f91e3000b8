#!/usr/bin/env bash
# A real single-machine Slurm for tests/e2e/test_slurm.py: Debian's slurm-wlm
# (slurmctld + slurmd) and munge, one node = this host, one partition.
#
# Run as root on a fresh Debian machine (CI: .ci/run runs it before `make test`;
# by hand: `sudo bash .ci/setup.d/30-slurm.sh` or `make slurm-up`). Idempotent:
# installs only what is missing, rewrites slurm.conf only when this host's
# facts changed (and then restarts the daemons), starts only daemons that are
# not running, and returns once `sinfo` shows the node idle.
#
# Daemons are started directly, not through systemd: CI machines and containers
# often have no init system. Nothing here is specific to one machine: the node
# name, CPU count and memory are read from the host.
set -euo pipefail

SLURM_CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
WAIT_S=${SLURM_SETUP_WAIT_S:-90}

log() { echo "[30-slurm] $*"; }
die() { echo "[30-slurm] error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and starts daemons)"

# --- packages ---------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
   || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || die "no apt-get: install slurm-wlm (slurmctld, slurmd, sbatch) and munge by hand"
  export DEBIAN_FRONTEND=noninteractive
  # Other setup steps (or other users of the machine) may hold the dpkg lock: wait for it.
  apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }
  if ! apt-cache show slurmctld >/dev/null 2>&1; then
    log "apt-get update"
    apt_get update -qq
  fi
  log "installing slurm-wlm and munge"
  # No init system on many CI hosts: package scripts must not try to start services
  # (policy-rc.d 101 = "action forbidden"); the daemons are started below.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; own_policy=1
  fi
  trap '[ "$own_policy" = 1 ] && rm -f "$policy"' EXIT
  apt_get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
  [ "$own_policy" = 1 ] && rm -f "$policy"
  trap - EXIT
fi

# --- munge (authentication between the Slurm daemons and clients) -----------------------------
if ! getent passwd munge >/dev/null; then
  die "the munge package did not create its 'munge' user"
fi
install -d -o munge -g munge -m 0700 /etc/munge
install -d -o munge -g munge -m 0711 /var/lib/munge
install -d -o munge -g munge -m 0700 /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  log "creating a munge key"
  if command -v mungekey >/dev/null; then
    mungekey --create --keyfile=/etc/munge/munge.key
  else
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  # munged refuses to run as root; it daemonizes itself.
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
  munge -n | unmunge >/dev/null || die "munged does not answer (see /var/log/munge/munged.log)"
fi

# --- slurm.conf for this host -----------------------------------------------------------------
host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
slurm_user=root
getent passwd slurm >/dev/null && slurm_user=slurm
state_dir=/var/lib/slurm/slurmctld
spool_dir=/var/lib/slurm/slurmd
install -d -m 0755 "$(dirname "$SLURM_CONF")" /var/lib/slurm
install -d -o "$slurm_user" -m 0755 "$state_dir" /var/log/slurm
install -d -m 0755 "$spool_dir"

new_conf=$(cat <<EOF
# Single-node Slurm written by .ci/setup.d/30-slurm.sh for the suite's tests.
ClusterName=suite
# Loopback addresses: the node needs no DNS entry for its own name.
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=${slurm_user}
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# No cgroup hierarchy is assumed (containers, CI VMs): track processes by parent
# pid, no CPU binding (torchrun places its own ranks).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# A rebooted or restarted node comes back by itself; config_overrides trusts the
# CPUs/RealMemory below even if slurmd detects a different topology.
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldPort=6817
SlurmdPort=6818
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=${state_dir}
SlurmdSpoolDir=${spool_dir}
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
KillWait=5
MinJobAge=30
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP
EOF
)

_pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if [ ! -f "$SLURM_CONF" ] || [ "$(cat "$SLURM_CONF")" != "$new_conf" ]; then
  log "writing $SLURM_CONF (node $host: $cpus CPUs, $mem_mb MB)"
  printf '%s\n' "$new_conf" >"$SLURM_CONF.tmp"
  mv "$SLURM_CONF.tmp" "$SLURM_CONF"
  if _pid_alive /run/slurmctld.pid || _pid_alive /run/slurmd.pid; then
    log "configuration changed: stopping the running Slurm daemons"
    scontrol shutdown >/dev/null 2>&1 || true
    for pidfile in /run/slurmctld.pid /run/slurmd.pid; do
      for _ in $(seq 50); do _pid_alive "$pidfile" || break; sleep 0.2; done
      if _pid_alive "$pidfile"; then kill "$(cat "$pidfile")" 2>/dev/null || true; sleep 1; fi
    done
  fi
fi

# --- daemons ----------------------------------------------------------------------------------
if ! _pid_alive /run/slurmctld.pid; then
  log "starting slurmctld"
  slurmctld
fi
if ! _pid_alive /run/slurmd.pid; then
  log "starting slurmd"
  slurmd
fi

# --- wait for the node -------------------------------------------------------------------------
deadline=$((SECONDS + WAIT_S))
state=""
while [ $SECONDS -lt $deadline ]; do
  state=$(sinfo -h -N -n "$host" -o %t 2>/dev/null | head -n1 || true)
  case "$state" in
    idle|mix|alloc) log "node $host is $state"; exit 0 ;;
    down*|drain*|drng*|fail*)
      # e.g. left down by an earlier configuration; the node is healthy if slurmd runs.
      scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
echo "[30-slurm] node $host did not become idle within ${WAIT_S}s (state: ${state:-unknown})" >&2
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 2>/dev/null || true
exit 1
