#!/usr/bin/env bash
# CI step: the basics `make test` needs on a bare Debian machine (root): make, a Python 3 that
# can create venvs, git. Idempotent: installs only what is missing.
set -euo pipefail
need=()
command -v make >/dev/null 2>&1 || need+=(make)
command -v git >/dev/null 2>&1 || need+=(git)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# Debian's python3 cannot create a venv without python3-venv (ensurepip).
if command -v python3 >/dev/null 2>&1 && ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  need+=(python3-venv)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=120 update -qq
  apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends "${need[@]}" python3-venv ca-certificates >/dev/null
fi
python3 --version
