#!/usr/bin/env bash
# Prepare a local PostgreSQL for the tests marked `postgres`, as root on Debian 12; safe to run again.
#   1. installs Debian's postgresql when missing;
#   2. starts the cluster when it is down;
#   3. creates (or resets the password of) the role mlcbench and the database mlcbench_test it owns.
# The last line of stdout is the export the tests read, e.g.
#   eval "$(bash .ci/postgres-setup.sh | tail -1)"
set -euo pipefail

ROLE=mlcbench
DATABASE=mlcbench_test
PASSWORD=${MLCBENCH_PG_PASSWORD:-mlcbench-test}
PORT=5432
log() { echo "postgres-setup: $*" >&2; }

if ! command -v pg_ctlcluster >/dev/null; then
    log "installing postgresql"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql
fi

version=$(pg_lsclusters --no-header | awk '$2 == "main" {print $1; exit}')
[ -n "$version" ] || { log "no 'main' cluster (pg_lsclusters shows none)"; exit 1; }
if ! pg_lsclusters --no-header | awk -v v="$version" '$1 == v && $2 == "main" {print $4}' | grep -q online; then
    log "starting cluster $version/main"
    pg_ctlcluster "$version" main start
fi
for _ in $(seq 30); do
    pg_isready -q -h 127.0.0.1 -p "$PORT" && break
    sleep 1
done
pg_isready -q -h 127.0.0.1 -p "$PORT" || { log "PostgreSQL does not answer on 127.0.0.1:$PORT"; exit 1; }

psql_admin() { runuser -u postgres -- psql -v ON_ERROR_STOP=1 -qtA "$@"; }
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" != 1 ]; then
    log "creating role $ROLE"
    psql_admin -c "CREATE ROLE $ROLE LOGIN CREATEROLE PASSWORD '$PASSWORD'"
else
    psql_admin -c "ALTER ROLE $ROLE LOGIN CREATEROLE PASSWORD '$PASSWORD'"
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")" != 1 ]; then
    log "creating database $DATABASE"
    psql_admin -c "CREATE DATABASE $DATABASE OWNER $ROLE"
fi

echo "export MLCBENCH_TEST_POSTGRES_URL=postgresql+psycopg://$ROLE:$PASSWORD@127.0.0.1:$PORT/$DATABASE"
