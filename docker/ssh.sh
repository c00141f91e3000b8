#!/bin/sh
# The ssh that hydra's mpiexec runs to start its proxies on the other compose nodes (HYDRA_LAUNCHER_EXEC in
# docker-compose.yml): the job's key from the nodes' shared volume (docker/sshd.sh), no host-key prompt (each
# node's host key is made when it starts), and a peer that stops answering ends the connection within 15 s.
exec ssh -i /run/suite-ssh/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no \
  -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=10 -o ServerAliveInterval=5 \
  -o ServerAliveCountMax=3 "$@"
