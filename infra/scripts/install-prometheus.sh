#!/usr/bin/env bash
# Installs Prometheus and promtool from Debian's `prometheus` package for the alert-rule tests
# (test/infra/prometheus-rules.test.ts runs `promtool`; test/infra/prometheus-lag-alert.test.ts
# starts a `prometheus` of its own on a free port). Does nothing when both are there, so
# `make test` can call it every time. The package's own service is not wanted: it is stopped and
# disabled when this script installed it.
set -euo pipefail

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-prometheus: promtool or prometheus is missing and apt-get is not available; install Prometheus by hand" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

echo "install-prometheus: installing prometheus (and promtool) from Debian's packages" >&2
$SUDO apt-get update -qq
# No recommends: the node exporter is not needed.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# Where systemd runs, the package enables and starts a Prometheus on :9090 scraping itself.
if [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
promtool --version 2>&1 | head -n 1 >&2
