#!/usr/bin/env bash
# capstan's test command: brings up the dev services (MySQL 9.x and MariaDB, see services.sh)
# and runs every test in the workspace against them. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/capstan/target}
deploy/dev/services.sh up
eval "$(deploy/dev/services.sh env)"
cargo test --workspace "$@"
