#!/usr/bin/env bash
# capstan's main job, end to end, on one machine:
#   a real MySQL 9.x dev server, a real Apache Kafka 4.x broker (KRaft), three
#   capstan workers forming a Raft cluster, a pipeline created through the REST API, some rows
#   written on MySQL, and the resulting change events printed by kcat, a Kafka client capstan
#   did not write.
#
#   deploy/quickstart.sh            (needs root: the MySQL dev server runs in a chroot)
#
# The workers stop when the script ends; the MySQL and Kafka dev services keep running
# (`deploy/dev/services.sh down` stops them). Logs and data go to a temporary directory that the
# script names and keeps (CAPSTAN_QUICKSTART_DIR to choose it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/capstan/target}
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "installing missing system packages"
deploy/dev/install-deps.sh

say "starting the dev services: MySQL 9.x, MariaDB and Apache Kafka (KRaft)"
deploy/dev/services.sh up
eval "$(deploy/dev/services.sh env)"

say "building capstan (the first build compiles RocksDB and librdkafka: 15-20 minutes)"
cargo build -p capstan-worker --bin capstan
capstan=$CARGO_TARGET_DIR/debug/capstan

dir=${CAPSTAN_QUICKSTART_DIR:-$(mktemp -d /tmp/capstan-quickstart.XXXXXX)}
mkdir -p "$dir"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 3
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "quickstart: workers stopped; logs in $dir" >&2
}
trap cleanup EXIT

bootstrap=$CAPSTAN_KAFKA_BOOTSTRAP
echo "kafka bootstrap servers: $bootstrap (Apache Kafka $CAPSTAN_KAFKA_VERSION)"
# the broker keeps its topics across runs: each run writes topics of its own
prefix=demo$(date +%s)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -A raft api
for id in 1 2 3; do raft[$id]=$(free_port); api[$id]=$(free_port); done
members=""
for id in 1 2 3; do
  members+="{ id = $id, raft = \"127.0.0.1:${raft[$id]}\", api = \"127.0.0.1:${api[$id]}\" },"$'\n'
done

say "starting three capstan workers"
for id in 1 2 3; do
  cat >"$dir/worker-$id.toml" <<TOML
node_id = $id
data_dir = "$dir/data-$id"
raft_listen = "127.0.0.1:${raft[$id]}"
api_listen = "127.0.0.1:${api[$id]}"
initial_members = [
$members]
TOML
  "$capstan" worker --config "$dir/worker-$id.toml" 2>"$dir/worker-$id.log" &
  pids+=($!)
  echo "worker $id: api http://127.0.0.1:${api[$id]}"
done
url=http://127.0.0.1:${api[2]}
for _ in $(seq 1 100); do
  leader=$(curl -fsS "$url/cluster" 2>/dev/null | jq -r '.leader // empty' || true)
  [[ -n $leader ]] && break
  sleep 0.2
done
[[ -n ${leader:-} ]] || { echo "no raft leader; see $dir/worker-*.log" >&2; exit 1; }
echo "raft leader: worker $leader"
curl -fsS "$url/cluster" | jq -c '{leader, term, members: [.members[] | {id, voter}]}'

say "creating a demo table on MySQL"
schema=quickstart
chroot "$HOME/.cache/capstan/mysql-sid-chroot" mysql --no-defaults -uroot --socket=/run/capstan-mysql.sock <<SQL
DROP DATABASE IF EXISTS $schema;
CREATE DATABASE $schema;
CREATE TABLE $schema.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), added DATETIME(3));
INSERT INTO $schema.items VALUES (10, 'fig', 3.10, NOW(3)), (11, 'kiwi', 0.80, NOW(3)), (12, 'plum', 1.20, NOW(3));
SQL

say "creating the pipeline with an initial snapshot of the 3 existing rows (through worker 2's API; writes reach the leader wherever they land)"
definition=$(jq -n \
  --arg host "$CAPSTAN_MYSQL_HOST" --argjson port "$CAPSTAN_MYSQL_PORT" \
  --arg user "$CAPSTAN_MYSQL_USER" --arg password "$CAPSTAN_MYSQL_PASSWORD" \
  --arg bootstrap "$bootstrap" --arg prefix "$prefix" --arg table "$schema.items" '{
    name: "quickstart",
    source: {host: $host, port: $port, user: $user, password: $password,
             tls: {mode: "verify_none"}, server_id: 7001, flavor: "mysql"},
    tables: {include: [$table]},
    snapshot: {mode: "initial", chunk_size: 2},
    kafka: {bootstrap_servers: $bootstrap, topic_prefix: $prefix},
    start_position: "current"
  }')
curl -fsS -X POST -H 'content-type: application/json' -d "$definition" "$url/pipelines" | jq -c .
curl -fsS -X PUT "$url/pipelines/quickstart/resume" >/dev/null
for _ in $(seq 1 100); do
  state=$(curl -fsS "$url/pipelines/quickstart/status" | jq -r .state)
  [[ $state == streaming ]] && break
  [[ $state == failed ]] && { curl -fsS "$url/pipelines/quickstart/status" | jq .; exit 1; }
  sleep 0.2
done
curl -fsS "$url/pipelines/quickstart/status" | jq -c '{name, owner, epoch, state, snapshot}'

say "writing rows on MySQL"
chroot "$HOME/.cache/capstan/mysql-sid-chroot" mysql --no-defaults -uroot --socket=/run/capstan-mysql.sock <<SQL
INSERT INTO $schema.items VALUES (1, 'apple', 1.50, NOW(3)), (2, 'pear', 2.25, NOW(3));
UPDATE $schema.items SET price = 1.75 WHERE id = 1;
DELETE FROM $schema.items WHERE id = 2;
SQL

say "change events as a Kafka consumer (kcat) sees them: key | value"
topic=$prefix.$schema.items
events=""
for _ in $(seq 1 50); do
  events=$(kcat -b "$bootstrap" -C -t "$topic" -e -q -f '%k | %s\n' 2>/dev/null || true)
  [[ $(grep -c . <<<"$events") -ge 8 ]] && break
  sleep 0.3
done
printf '%s\n' "$events" | while IFS= read -r line; do
  key=${line%% | *}; value=${line#* | }
  if [[ -z $value ]]; then
    printf '%s | (tombstone)\n' "$key"
  else
    printf '%s | %s\n' "$key" "$(jq -c '{op, before, after, source: {db: .source.db, table: .source.table, snapshot: .source.snapshot, gtid: .source.gtid}}' <<<"$value")"
  fi
done

say "the snapshot's completion, on the control topic $prefix.snapshot_complete: key | value"
kcat -b "$bootstrap" -C -t "$prefix.snapshot_complete" -e -q -f '%k | %s\n' 2>/dev/null || true

say "the committed checkpoint"
sleep 1
curl -fsS "$url/pipelines/quickstart/status" | jq -c '{state, position}'
