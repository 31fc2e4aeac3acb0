#!/usr/bin/env bash
# Installs headless Chromium from Debian's packages for the browser tests
# (test/services/api/dashboard.browser.test.ts drives /usr/bin/chromium with playwright-core).
# Does nothing when Chromium is already there, so `make test` can call it every time.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-browser: $CHROMIUM is missing and apt-get is not available; install Chromium by hand" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

echo "install-browser: installing chromium from Debian's packages" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
"$CHROMIUM" --version >&2
