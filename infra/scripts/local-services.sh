#!/usr/bin/env bash
# Makes sure Postgres (127.0.0.1:5432, trust auth) and Redis (127.0.0.1:6379) answer on loopback.
# Where one does not, it is installed from Debian's packages and started with data under DATA_DIR.
set -euo pipefail

DATA_DIR=$(mkdir -p "${DATA_DIR:-./.data}" && cd "${DATA_DIR:-./.data}" && pwd)
PG_PORT=5432
REDIS_PORT=6379
apt_updated=0

log() { echo "[services] $*"; }

apt_install() {
  if [ "$apt_updated" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

as_postgres() { runuser -u postgres -- "$@"; }

pg_ready() { command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p "$PG_PORT"; }

start_postgres() {
  if pg_ready; then return; fi
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    log "installing PostgreSQL from Debian's packages"
    apt_install postgresql
  fi
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  # A cluster of the machine (Debian's `main`) is started when it exists.
  if command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q .; then
    local ver name
    read -r ver name _ < <(pg_lsclusters -h | head -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start 2>/dev/null || true
    sleep 1
  fi
  if ! pg_ready; then
    local pgdata="$DATA_DIR/postgres"
    log "starting PostgreSQL with data in $pgdata"
    mkdir -p "$pgdata"
    chown -R postgres "$pgdata"
    if [ ! -f "$pgdata/PG_VERSION" ]; then
      as_postgres "$bin/initdb" -D "$pgdata" --auth=trust -U postgres >/dev/null
    fi
    as_postgres "$bin/pg_ctl" -D "$pgdata" -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k /tmp" -l "$pgdata/server.log" -w start >/dev/null
  fi
  local me
  me=$(id -un)
  psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$me'" | grep -q 1 ||
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "CREATE ROLE \"$me\" SUPERUSER LOGIN"
}

start_redis() {
  if command -v redis-cli >/dev/null && redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then return; fi
  if ! command -v redis-server >/dev/null; then
    log "installing Redis from Debian's packages"
    apt_install redis-server
  fi
  mkdir -p "$DATA_DIR/redis"
  log "starting Redis on 127.0.0.1:$REDIS_PORT with data in $DATA_DIR/redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$DATA_DIR/redis" \
    --appendonly yes --maxmemory-policy noeviction --logfile "$DATA_DIR/redis/redis.log"
  for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1 && return; sleep 0.1; done
  log "Redis did not start; see $DATA_DIR/redis/redis.log"
  exit 1
}

start_postgres
start_redis
log "Postgres and Redis answer on loopback"
