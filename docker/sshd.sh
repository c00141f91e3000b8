#!/bin/sh
# BACKEND=mpi across the compose nodes: node 0's mpiexec (hydra) starts every node's ranks over ssh, as the
# Kubeflow MPI operator does. Run by docker/entrypoint.sh as root, before it drops to the run's user:
#
#   docker/sshd.sh UID GID
#
# - the run's user gets a passwd entry where it has none (an arbitrary host uid): ssh and sshd need one, with
#   the same name on every node;
# - this node's sshd host key is made (none is baked into the image), and sshd started (docker/sshd_config);
# - node 0 makes the job's key pair in the nodes' shared volume (/run/suite-ssh, a fresh one every run),
#   its private half readable by the run's user only; every node's sshd accepts that key only.
set -eu
uid=$1 gid=$2
KEYS=/run/suite-ssh
if ! [ -x /usr/sbin/sshd ] || ! command -v ssh >/dev/null; then
  echo "error: BACKEND=mpi across nodes needs sshd and ssh in the image (openssh-server, openssh-client): rebuild it with make image" >&2
  exit 3
fi
if ! [ -d "$KEYS" ]; then
  echo "error: BACKEND=mpi across nodes needs the nodes' shared volume at $KEYS (docker-compose.yml mounts it)" >&2
  exit 3
fi
if ! getent group "$gid" >/dev/null; then groupadd -o -g "$gid" "g$gid"; fi
if ! getent passwd "$uid" >/dev/null; then
  useradd -o -u "$uid" -g "$gid" -M -d /tmp -s /bin/sh -p '*' "u$uid"
fi
mkdir -p /run/sshd /run/suite-sshd
ssh-keygen -q -t ed25519 -N '' -C "host $(hostname)" -f /run/suite-sshd/ssh_host_ed25519_key
if [ "${NODE_RANK:-0}" = 0 ]; then
  # made under temporary names, then moved into place: a node never reads half a key
  rm -f "$KEYS/new" "$KEYS/new.pub"
  ssh-keygen -q -t ed25519 -N '' -C "suite job $(hostname)" -f "$KEYS/new"
  chown "$uid:$gid" "$KEYS/new"
  chmod 0600 "$KEYS/new"
  chmod 0644 "$KEYS/new.pub"
  mv "$KEYS/new.pub" "$KEYS/authorized_keys"
  mv "$KEYS/new" "$KEYS/id_ed25519"
  chmod 0755 "$KEYS"
fi
/usr/sbin/sshd -f /opt/suite/docker/sshd_config -E /run/suite-sshd/sshd.log
