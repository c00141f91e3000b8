#!/usr/bin/env bash
# A headless browser for tests/e2e/test_report.py (the HTML report must render in a real browser).
# Idempotent: does nothing when chromium is already installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  echo "chromium present: $(command -v chromium || command -v chromium-browser)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium
