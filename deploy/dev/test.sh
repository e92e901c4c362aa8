#!/usr/bin/env bash
# capstan's test command: brings up the dev services (MySQL 9.x and MariaDB, see services.sh)
# and runs every test in the workspace against them. Extra arguments go to `cargo test`.
# The last line sums up every test binary's result.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/capstan/target}
deploy/dev/install-deps.sh
deploy/dev/browser-deps.sh   # chromium and playwright-core for the status page's browser test
deploy/dev/services.sh up
eval "$(deploy/dev/services.sh env)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# multi-process tests run the real `capstan` binary. Built with every target of the workspace
# so that its dependencies get the same features as `cargo test --workspace` below: a build of
# the worker package alone unifies them differently and compiles RocksDB a second time.
cargo build --workspace --all-targets
# --no-fail-fast: one failing test binary does not hide how the others fare
cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { p += $4; f += $6; i += $8 }
     END { printf "summary: %d passed, %d failed, %d skipped\n", p, f, i }' "$log"
exit "$status"
