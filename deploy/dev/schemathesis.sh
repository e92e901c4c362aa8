#!/usr/bin/env bash
# Fuzzes a running worker's REST API with schemathesis (from PyPI), driven by the worker's own
# OpenAPI document: every operation is sent generated valid and invalid requests, and each answer
# is checked against the document (no 5xx, only documented status codes, bodies matching their
# schemas, ...).
#
#   deploy/dev/schemathesis.sh install                 create the venv and install (idempotent)
#   deploy/dev/schemathesis.sh version                 print the pinned version
#   deploy/dev/schemathesis.sh URL [ARGS...]           schemathesis run URL/openapi.json ARGS...
#
# URL is a worker's API base, e.g. http://127.0.0.1:8080. ARGS go to `schemathesis run`
# unchanged (schemathesis 4.x: -c/--checks, --exclude-checks, -n/--max-examples, --seed,
# --phases, --max-time, -H "Authorization: Bearer TOKEN", -w/--workers, --report ...; see
# `deploy/dev/schemathesis.sh http://x --help`). With a token configured, pass the header, or
# every mutating request is answered 401.
#
# The venv lives in $CAPSTAN_SCHEMATHESIS_VENV (default ~/.cache/capstan/schemathesis-venv) and
# is built with the first `python3` on PATH; pip uses this machine's own configuration. Exit
# codes: schemathesis' own (0 no failure, 1 failures found, 2 usage error), or 75 when
# schemathesis could not be installed (so a test can tell "cannot fuzz here" from "fuzzing
# failed"). Requests go to the given URL only.
#
# deploy/dev/schemathesis.toml holds the settings every run shares (half of the generated
# pipeline names are `fuzz`, and which check does not apply to which operation, with the
# reasons); deploy/dev/schemathesis_hooks.py keeps the member addresses generated for
# POST /cluster/members on loopback (the worker connects to them), keeps the fuzzer from
# removing members, and deletes `fuzz-delete` where `fuzz` was to be deleted. Create pipelines
# named `fuzz` and `fuzz-delete` first to let requests reach the handlers past their 404.
# Run it on a test cluster only: it pauses, restarts and reconfigures those pipelines.
set -euo pipefail

VERSION=4.32.5
venv=${CAPSTAN_SCHEMATHESIS_VENV:-${CAPSTAN_CACHE:-$HOME/.cache/capstan}/schemathesis-venv}
EX_NOT_INSTALLED=75

installed_version() {
  "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null || true
}

install() {
  mkdir -p "$(dirname "$venv")"
  # one installer at a time (tests may start beside each other); the lock is released after
  ( flock 9 && install_locked ) 9>"$venv.lock"
}

install_locked() {
  if [[ $(installed_version) == "$VERSION" ]]; then
    return 0
  fi
  echo "schemathesis.sh: installing schemathesis $VERSION into $venv" >&2
  # a venv whose python no longer runs (its interpreter was replaced) is made again
  if ! "$venv/bin/python" -c '' 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" || {
      echo "schemathesis.sh: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
      return 1
    }
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$VERSION" >&2 || {
    echo "schemathesis.sh: pip install schemathesis==$VERSION failed" >&2
    return 1
  }
  [[ $(installed_version) == "$VERSION" ]]
}

case ${1:-} in
  -h | --help)
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
    exit 0
    ;;
  "")
    echo "usage: $0 install | version | URL [schemathesis run ARGS...]" >&2
    exit 2
    ;;
  version)
    echo "$VERSION"
    exit 0
    ;;
  install)
    install || exit "$EX_NOT_INSTALLED"
    exit 0
    ;;
esac

url=${1%/}
shift
install || exit "$EX_NOT_INSTALLED"
here=$(cd "$(dirname "$0")" && pwd)
export SCHEMATHESIS_HOOKS=$here/schemathesis_hooks.py
# no __pycache__ beside the hooks in the checkout
export PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/schemathesis" --config-file "$here/schemathesis.toml" run "$url/openapi.json" "$@"
