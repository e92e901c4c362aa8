#!/usr/bin/env bash
# Confluent's Python client decoding capstan's Avro records (deploy/dev/avro_consumer.py): the
# proof by code capstan did not write that `kafka.format: avro` is Confluent's wire format and
# Debezium's Avro schemas (tests/tests/debezium_converters.rs calls it).
#
#   deploy/dev/avro-consumer.sh install     create the venv and install confluent-kafka[avro]
#   deploy/dev/avro-consumer.sh ARGS...     install if needed, then run avro_consumer.py ARGS
#
# The venv lives in ${CAPSTAN_CACHE:-~/.cache/capstan}/avro-venv; a rerun reuses it. pip uses
# this machine's own configuration. Needs Python >= 3.9 with venv (Debian: python3-venv, which
# deploy/dev/install-deps.sh installs); confluent-kafka comes as a wheel with librdkafka inside.
set -euo pipefail

CONFLUENT_KAFKA_VERSION=2.16.1

CACHE=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
VENV=$CACHE/avro-venv
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf 'avro-consumer: %s\n' "$*" >&2; }
die() { printf 'avro-consumer: error: %s\n' "$*" >&2; exit 1; }

install() {
  mkdir -p "$CACHE"
  # one installer at a time: the MySQL and MariaDB tests start side by side on a new machine
  ( flock 9 && install_locked ) 9>"$VENV.lock"
}

install_locked() {
  local stamp=$VENV/.capstan-installed pkgs=("confluent-kafka[avro,schemaregistry]==$CONFLUENT_KAFKA_VERSION")
  local want="${pkgs[*]}"
  if [[ -x $VENV/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then return; fi
  command -v python3 >/dev/null || die "python3 is missing"
  if [[ ! -x $VENV/bin/python ]]; then
    log "creating the venv in $VENV"
    python3 -m venv "$VENV" || { rm -rf "$VENV"; die "python3 -m venv failed (Debian: apt-get install python3-venv)"; }
  fi
  log "installing $want"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${pkgs[@]}" \
    || die "pip could not install $want"
  echo "$want" >"$stamp"
}

case ${1:-} in
  install) install ;;
  "") die "usage: $0 install | BOOTSTRAP TOPIC REGISTRY_URL SENTINEL_ID [TIMEOUT_S]" ;;
  *)
    install
    # bounded twice: avro_consumer.py dumps its stacks and exits when it outlives its own
    # deadline (faulthandler), and `timeout` is the backstop should the interpreter itself hang
    exec timeout 300 "$VENV/bin/python" "$HERE/avro_consumer.py" "$@"
    ;;
esac
