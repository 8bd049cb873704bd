#!/usr/bin/env bash
# Makes sure everything the test suite needs is present and running. As root it installs
# missing Debian packages and starts local services; otherwise it fails naming what is missing.
# Idempotent: fast when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
need_cmd() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }

# (Stores added later extend these lists: postgres, redis-server, etcd.)

# >>> redis (issue 4): the shared Redis on 127.0.0.1:6379 and the redis-server binary that
# the fault tests start as throwaway processes (failover, restart, eviction), the Cluster
# tests (`redis-cli --cluster create`) and the Sentinel tests (`redis-server conf --sentinel`:
# the sentinel is the same binary, so no redis-sentinel package is needed).
need_cmd redis-server redis-server
need_cmd redis-cli redis-tools
# <<< redis

# --- etcd (issue 5) -------------------------------------------------------------------------
# Tests start their own etcd processes (single node and a 3-member cluster) on free loopback
# ports with temp data dirs; they need the `etcd` server and `etcdctl` (interop tests) binaries.
need_cmd etcd etcd-server
need_cmd etcdctl etcd-client
# --- end etcd --------------------------------------------------------------------------------

# --- pgbouncer (deployment tests) --------------------------------------------------------------
# Tests start their own pgbouncer processes (transaction and session pooling) on free loopback
# ports in front of the shared PostgreSQL; they need only the binary.
need_cmd pgbouncer pgbouncer
# --- end pgbouncer ---------------------------------------------------------------------------

# --- ceph (catalog over S3) --------------------------------------------------------------------
# test/fencing/catalog/sqlite-rgw starts its own Ceph (one monitor, one in-memory OSD, a RADOS Gateway)
# on free loopback ports: an S3-compatible server that refuses PutObject with If-None-Match: *
# on an existing key, which s3rver does not.
need_cmd ceph-mon ceph-mon
need_cmd ceph-osd ceph-osd
need_cmd radosgw radosgw
# --- end ceph --------------------------------------------------------------------------------

# The HTTP API examples (examples/) are run by test/docs: Python's standard library and curl.
need_cmd python3 python3
need_cmd curl curl

# The fence-in-your-own-transaction examples (examples/fence-in-transaction/, run by
# test/fencing/in-transaction): psycopg with PostgreSQL and redis-py with FCALL, from Debian's packages
# (they install for Debian's own /usr/bin/python3), and psql alone.
need_py() { /usr/bin/python3 -c "import $1" >/dev/null 2>&1 || missing+=("$2"); }
need_py psycopg python3-psycopg
need_py redis python3-redis
need_cmd psql postgresql-client

# docs/production.md's alert rules are checked by promtool (Debian's prometheus package) and
# its systemd units by systemd-analyze.
need_cmd promtool prometheus
need_cmd systemd-analyze systemd

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "setup: missing Debian packages: ${missing[*]} (install them, or run as root)" >&2
    exit 1
  fi
fi

# >>> redis (issue 4): the shared test Redis must answer on 127.0.0.1:6379.
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    echo "setup: starting redis-server on 127.0.0.1:6379"
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log
    for _ in $(seq 1 50); do
      redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break
      sleep 0.1
    done
  fi
  if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    echo "setup: Redis is not answering on 127.0.0.1:6379 (start redis-server, or run as root)" >&2
    exit 1
  fi
fi
# <<< redis

# --- postgres (issue 3): the shared PostgreSQL server on 127.0.0.1:5432 (db `test`, trust) ---
# Self-contained so that other stores' blocks merge cleanly. Tests need pg_isready, and
# pg_dump / pg_restore for the restore test; as root a stopped cluster is started.
if ! command -v pg_isready >/dev/null 2>&1 || ! command -v pg_dump >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    echo "setup: installing postgresql-client"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-client
  else
    echo "setup: missing Debian package: postgresql-client (install it, or run as root)" >&2
    exit 1
  fi
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if [ "$(id -u)" = "0" ] && command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    pg_version="$(ls /etc/postgresql | sort -V | tail -n 1)"
    echo "setup: starting PostgreSQL ${pg_version}/main"
    pg_ctlcluster --skip-systemctl-redirect "${pg_version}" main start || true
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done
  fi
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    echo "setup: PostgreSQL is not accepting connections on 127.0.0.1:5432 (db test, user postgres, trust auth); start it, or run this script as root" >&2
    exit 1
  fi
fi
# --- end postgres ---

# --- fault suite on networked stores (issue 7) ----------------------------------------------
# test/fault starts throwaway PostgreSQL servers (initdb + pg_ctl on a free port), besides the
# redis-server and etcd binaries checked above.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    echo "setup: installing postgresql (server binaries for throwaway test servers)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql
  else
    echo "setup: missing PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb; Debian package postgresql)" >&2
    exit 1
  fi
fi
# --- end fault suite ---

# --- dashboard browser test (issue 6) ------------------------------------------------------
# test/server/dashboard-browser.test.ts drives the dashboard in headless Chromium through
# playwright-core (no bundled browser download): it needs /usr/bin/chromium.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ]; then
    echo "setup: installing chromium"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else
    echo "setup: missing /usr/bin/chromium (Debian package chromium; install it, or run as root)" >&2
    exit 1
  fi
fi
# --- end dashboard browser test ---

if [ ! -f node_modules/better-sqlite3/build/Release/better_sqlite3.node ]; then
  echo "setup: better-sqlite3's native module is missing; run 'npm ci' (its install script must be allowed)" >&2
  exit 1
fi
echo "setup: test environment ready"
