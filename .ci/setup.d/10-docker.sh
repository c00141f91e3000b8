#!/usr/bin/env bash
# CI step: a Docker engine and docker-compose for the compose tests (tests/docker/, tests/unit/test_compose_files.py).
# Runs as root on a fresh Debian machine; idempotent (a second run changes nothing).
# - installs Debian's docker.io, docker-compose (v1) and debootstrap unless an engine already answers
#   (hosted runners ship their own engine; installing docker.io next to it would conflict);
# - starts dockerd when no engine answers (no systemd here: started directly, logging to a file);
# - waits until the engine answers, then starts building the images in the background (`make image`: the
#   local base first where no registry is reachable), so the Docker tests find them cached.
set -euo pipefail
cd "$(dirname "$0")/../.."

engine_up() { docker info >/dev/null 2>&1; }

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || need+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if ! engine_up && [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=120 update -qq
  apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends "${need[@]}" iptables ca-certificates >/dev/null
elif [ ${#need[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  # an engine runs already: add only the compose tool and debootstrap (for the local base) if missing
  rest=()
  for p in "${need[@]}"; do [ "$p" = docker.io ] || rest+=("$p"); done
  [ ${#rest[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq \
    --no-install-recommends "${rest[@]}" >/dev/null || true
fi

if ! engine_up; then
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl start docker
  else
    echo "starting dockerd (log: /var/log/dockerd.log)"
    nohup dockerd >/var/log/dockerd.log 2>&1 </dev/null &
  fi
  for _ in $(seq 1 60); do engine_up && break; sleep 1; done
fi
if ! engine_up; then
  echo "error: the Docker engine did not come up within 60 s; last lines of its log:" >&2
  tail -n 20 /var/log/dockerd.log >&2 || true
  exit 1
fi
docker version --format 'engine {{.Server.Version}} (API {{.Server.APIVersion}})'

# Build (or find cached) the images the Docker tests use -- the slim one of the compose tests, then the
# CUDA one (tests/docker/test_cuda_image.py: ~3 minutes cold, most of it downloading) -- in the
# background, while the other setup steps and the tiers before the Docker tier run. The tests' own
# `make image` waits for them (docker/image.sh takes a lock) and finds them cached; a background build
# that failed is simply built again there, with its error in the test's output.
if [ "${SKIP_IMAGE_BUILD:-0}" != 1 ]; then
  make venv  # in the foreground: `make test` must not start creating it while the builds do
  log=/var/log/suite-images.log
  echo "building the images in the background (log: $log)"
  # at the lowest priority (nice on the host, CPU shares in the build's containers): the tests that run
  # beside it keep the CPUs, and the build takes what they leave idle (waits, timeouts, Slurm's scheduling)
  nohup nice -n 19 env BUILD_CPU_SHARES=2 \
    bash -c 'make -s image && make -s image VARIANT=full BASE_IMAGE=local IMAGE=torch-comm-suite:cuda' \
    >"$log" 2>&1 </dev/null &
fi
