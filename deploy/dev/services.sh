#!/usr/bin/env bash
# capstan dev services: a real MySQL 9.x (Debian sid, in a debootstrap'd chroot) and a real
# MariaDB (Debian's mariadb-server), each on a private loopback port with the binlog settings
# capstan depends on, real Apache Kafka 4.x brokers (KRaft) from deploy/dev/kafka.sh: a
# single broker, and a 3-broker cluster (replication factor 3) for the tests that stop a broker,
# and a real Schema Registry (Apicurio Registry 3.x, Confluent-compatible API, schemas in
# memory) from deploy/dev/registry.sh.
#
#   deploy/dev/services.sh up       start all (idempotent: a running server is left alone)
#   deploy/dev/services.sh down     stop all and release the chroot's mounts
#   deploy/dev/services.sh status   say what runs where; exit 1 if any is down
#   deploy/dev/services.sh restart-mysql   stop and start MySQL only (data kept; idempotent)
#   deploy/dev/services.sh stop-mysql | start-mysql   MySQL only, for source-outage tests
#   deploy/dev/services.sh env      print the connection settings tests read (eval-able)
#   deploy/dev/services.sh reset    down, then wipe every data directory (caches kept)
#
# CAPSTAN_KAFKA_CLUSTER=0 makes `up` skip the Kafka cluster (the single broker always starts):
# it costs ~1 GiB of memory and ~0.1 core while idle, and ~12 s at start. Single brokers and
# cluster brokers stop and start on their own with deploy/dev/kafka.sh (stop, start,
# stop-broker N, start-broker N; see there), which `env` names in CAPSTAN_KAFKA_SCRIPT.
#
# CAPSTAN_REGISTRY=0 makes `up` skip the Schema Registry (~250 MiB of memory, ~8 s at start; it
# needs a Java 21 or newer, which deploy/dev/registry.sh finds or installs). `env` names its
# Confluent API in CAPSTAN_TEST_REGISTRY_URL and the script in CAPSTAN_REGISTRY_SCRIPT.
#
# A third server, the MySQL *twin* (same chroot, its own data directory and server_uuid, on
# CAPSTAN_MYSQL_TWIN_PORT), is a different server of the same flavour: the tests that prove
# capstan notices when a connection reaches another server than the stream's use it.
#
# The package mirror is read from this machine's apt configuration (or CAPSTAN_DEBIAN_MIRROR);
# no package host is named here. Everything lives under CAPSTAN_CACHE (default
# ~/.cache/capstan) so a rerun reuses the chroot and data directories and takes seconds.
set -euo pipefail

CACHE=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
KAFKA_SH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka.sh
REGISTRY_SH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/registry.sh
CHROOT=$CACHE/mysql-sid-chroot
RUN=$CACHE/run

MYSQL_PORT=${CAPSTAN_MYSQL_PORT:-43306}
MARIADB_PORT=${CAPSTAN_MARIADB_PORT:-43307}
TWIN_PORT=${CAPSTAN_MYSQL_TWIN_PORT:-43308}
# dev-only credentials for loopback servers; never reuse them anywhere else
CAPSTAN_USER=capstan
CAPSTAN_PASSWORD=capstan-dev-pw
ADMIN_USER=capstan_admin
ADMIN_PASSWORD=capstan-admin-dev-pw

# inside the chroot
MYSQL_DATA=/var/lib/capstan-mysql
MYSQL_SOCK=/run/capstan-mysql.sock
MYSQL_PID=/run/capstan-mysql.pid
MYSQL_LOG=/var/log/capstan-mysql.err
TWIN_DATA=/var/lib/capstan-mysql-twin
TWIN_SOCK=/run/capstan-mysql-twin.sock
TWIN_PID=/run/capstan-mysql-twin.pid
TWIN_LOG=/var/log/capstan-mysql-twin.err
# on the host
MARIADB_DATA=$CACHE/mariadb-data
MARIADB_SOCK=$RUN/mariadb.sock
MARIADB_PID=$RUN/mariadb.pid
MARIADB_LOG=$RUN/mariadb.err
# the dev CA that signs MariaDB's server certificate (MySQL's own is $CHROOT$MYSQL_DATA/ca.pem)
MARIADB_CA=$MARIADB_DATA/capstan-dev-ca.pem

log() { printf 'services: %s\n' "$*" >&2; }
die() { printf 'services: error: %s\n' "$*" >&2; exit 1; }

# The first plain Debian archive URI in the machine's apt sources (deb822 or one-line form).
apt_mirror() {
  if [[ -n ${CAPSTAN_DEBIAN_MIRROR:-} ]]; then echo "$CAPSTAN_DEBIAN_MIRROR"; return; fi
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] || continue
    uri=$(awk '
      /^[[:space:]]*$/ { if (types ~ /deb( |$)/ && uri != "" && suites !~ /security/) { print uri; exit } types=""; uri=""; suites=""; next }
      /^Types:/ { types=$0 }
      /^URIs:/ { uri=$2 }
      /^Suites:/ { suites=$0 }
      END { if (types ~ /deb( |$)/ && uri != "" && suites !~ /security/) print uri }' "$f" | grep -E '/debian/?$' | head -n1 || true)
    if [[ -n $uri ]]; then echo "$uri"; return; fi
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -r $f ]] || continue
    uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { if ($(i+1) !~ /security/) print $i; break } }' "$f" \
      | grep -E '/debian/?$' | head -n1 || true)
    if [[ -n $uri ]]; then echo "$uri"; return; fi
  done
  die "no Debian mirror found in the apt configuration; set CAPSTAN_DEBIAN_MIRROR"
}

need() { command -v "$1" >/dev/null 2>&1 || die "missing '$1' (install: $2)"; }

# ---------------------------------------------------------------- MySQL (chroot)

chroot_mounts() {
  local m
  for m in proc dev; do
    mountpoint -q "$CHROOT/$m" || mount --bind "/$m" "$CHROOT/$m"
  done
}

chroot_unmount() {
  local m f
  # a server still running in the chroot keeps its mounts (restart-mysql leaves the twin up)
  for f in "$MYSQL_PID" "$TWIN_PID"; do
    [[ -s $CHROOT$f ]] && kill -0 "$(cat "$CHROOT$f")" 2>/dev/null && return 0
  done
  for m in dev proc; do
    if mountpoint -q "$CHROOT/$m" 2>/dev/null; then umount -l "$CHROOT/$m"; fi
  done
}

mysql_chroot() {
  if [[ -x $CHROOT/usr/sbin/mysqld && -x $CHROOT/usr/bin/mysql ]]; then return; fi
  need debootstrap debootstrap
  local mirror
  mirror=$(apt_mirror)
  log "building the MySQL chroot (Debian sid) in $CHROOT"
  rm -rf "$CHROOT.partial"
  mkdir -p "$CACHE"
  debootstrap --variant=minbase sid "$CHROOT.partial" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -n 20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE/debootstrap.log)"; }
  mv "$CHROOT.partial" "$CHROOT"
  chroot_mounts
  # the mirror's Release file can be older than the clock: do not let that stop the install
  chroot "$CHROOT" apt-get -o Acquire::Check-Valid-Until=false -qq update
  chroot "$CHROOT" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false \
    install -y -qq --no-install-recommends mysql-server-core mysql-client >"$CACHE/mysql-install.log" 2>&1 \
    || { tail -n 20 "$CACHE/mysql-install.log" >&2; die "mysql install in the chroot failed"; }
  chroot "$CHROOT" apt-get clean
}

mysql_cli() { chroot "$CHROOT" mysql --no-defaults -uroot --socket="$MYSQL_SOCK" "$@"; }

mysql_running() {
  [[ -d $CHROOT ]] || return 1
  mountpoint -q "$CHROOT/proc" || return 1
  mysql_cli -Nse 'SELECT 1' >/dev/null 2>&1
}

mysql_up() {
  mysql_chroot
  chroot_mounts
  if mysql_running; then log "mysql already running on 127.0.0.1:$MYSQL_PORT"; mysql_grants; return; fi
  if [[ ! -d $CHROOT$MYSQL_DATA/mysql ]]; then
    log "initialising the MySQL data directory"
    rm -rf "${CHROOT:?}$MYSQL_DATA"
    chroot "$CHROOT" mysqld --no-defaults --initialize-insecure --user=root --datadir="$MYSQL_DATA" \
      >"$CACHE/mysql-init.log" 2>&1 || { tail -n 20 "$CACHE/mysql-init.log" >&2; die "mysqld --initialize failed"; }
  fi
  log "starting mysql on 127.0.0.1:$MYSQL_PORT"
  rm -f "$CHROOT$MYSQL_SOCK" "$CHROOT$MYSQL_PID"
  setsid chroot "$CHROOT" mysqld --no-defaults --user=root --datadir="$MYSQL_DATA" \
    --socket="$MYSQL_SOCK" --pid-file="$MYSQL_PID" --log-error="$MYSQL_LOG" \
    --bind-address=127.0.0.1 --port="$MYSQL_PORT" --mysqlx=OFF \
    --secure-file-priv= --server-id=1 \
    --gtid-mode=ON --enforce-gtid-consistency=ON --log-bin=binlog --binlog-format=ROW \
    --binlog-row-image=FULL --binlog-row-metadata=FULL \
    --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=2 --sync-binlog=0 \
    --max-connections=500 </dev/null >/dev/null 2>&1 &
  local _
  for _ in $(seq 1 120); do
    mysql_running && break
    sleep 0.5
  done
  mysql_running || { tail -n 30 "$CHROOT$MYSQL_LOG" >&2; die "mysql did not come up"; }
  mysql_grants
}

# The accounts and grants, idempotent; applied by every `up`, also to a server already running.
# capstan: replication, SELECT, and LOCK TABLES for the snapshot's brief per-chunk table lock.
grants_sql() {
  cat <<SQL
CREATE USER IF NOT EXISTS '$CAPSTAN_USER'@'%' IDENTIFIED BY '$CAPSTAN_PASSWORD';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, LOCK TABLES ON *.* TO '$CAPSTAN_USER'@'%';
GRANT XA_RECOVER_ADMIN ON *.* TO '$CAPSTAN_USER'@'%';
CREATE USER IF NOT EXISTS '$ADMIN_USER'@'%' IDENTIFIED BY '$ADMIN_PASSWORD';
GRANT ALL ON *.* TO '$ADMIN_USER'@'%' WITH GRANT OPTION;
SQL
}

mysql_grants() { mysql_cli <<<"$(grants_sql)"; }

mysql_down() {
  if mysql_running; then
    log "stopping mysql"
    mysql_cli -e 'SHUTDOWN' >/dev/null 2>&1 || true
  fi
  local pid _
  pid=$(cat "$CHROOT$MYSQL_PID" 2>/dev/null || true)
  if [[ -n $pid ]]; then
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$CHROOT$MYSQL_PID" 2>/dev/null || true
  chroot_unmount
}

# ---------------------------------------------------------------- the MySQL twin (chroot)

twin_cli() { chroot "$CHROOT" mysql --no-defaults -uroot --socket="$TWIN_SOCK" "$@"; }

twin_running() {
  [[ -d $CHROOT ]] || return 1
  mountpoint -q "$CHROOT/proc" || return 1
  twin_cli -Nse 'SELECT 1' >/dev/null 2>&1
}

twin_up() {
  mysql_chroot
  chroot_mounts
  if twin_running; then log "mysql twin already running on 127.0.0.1:$TWIN_PORT"; twin_cli <<<"$(grants_sql)"; return; fi
  if [[ ! -d $CHROOT$TWIN_DATA/mysql ]]; then
    log "initialising the MySQL twin's data directory"
    rm -rf "${CHROOT:?}$TWIN_DATA"
    chroot "$CHROOT" mysqld --no-defaults --initialize-insecure --user=root --datadir="$TWIN_DATA" \
      >"$CACHE/mysql-twin-init.log" 2>&1 || { tail -n 20 "$CACHE/mysql-twin-init.log" >&2; die "mysqld --initialize (twin) failed"; }
  fi
  log "starting the mysql twin on 127.0.0.1:$TWIN_PORT"
  rm -f "$CHROOT$TWIN_SOCK" "$CHROOT$TWIN_PID"
  setsid chroot "$CHROOT" mysqld --no-defaults --user=root --datadir="$TWIN_DATA" \
    --socket="$TWIN_SOCK" --pid-file="$TWIN_PID" --log-error="$TWIN_LOG" \
    --bind-address=127.0.0.1 --port="$TWIN_PORT" --mysqlx=OFF \
    --secure-file-priv= --server-id=3 \
    --gtid-mode=ON --enforce-gtid-consistency=ON --log-bin=binlog --binlog-format=ROW \
    --binlog-row-image=FULL --binlog-row-metadata=FULL \
    --innodb-buffer-pool-size=32M --innodb-flush-log-at-trx-commit=2 --sync-binlog=0 \
    --max-connections=100 </dev/null >/dev/null 2>&1 &
  local _
  for _ in $(seq 1 120); do
    twin_running && break
    sleep 0.5
  done
  twin_running || { tail -n 30 "$CHROOT$TWIN_LOG" >&2; die "the mysql twin did not come up"; }
  twin_cli <<<"$(grants_sql)"
}

twin_down() {
  if twin_running; then
    log "stopping the mysql twin"
    twin_cli -e 'SHUTDOWN' >/dev/null 2>&1 || true
  fi
  local pid _
  pid=$(cat "$CHROOT$TWIN_PID" 2>/dev/null || true)
  if [[ -n $pid ]]; then
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$CHROOT$TWIN_PID" 2>/dev/null || true
}

# ---------------------------------------------------------------- MariaDB (host)

mariadb_cli() { mariadb --no-defaults -uroot --socket="$MARIADB_SOCK" "$@"; }

mariadb_running() { mariadb_cli -Nse 'SELECT 1' >/dev/null 2>&1; }

mariadb_up() {
  need mariadbd mariadb-server
  need mariadb mariadb-client
  mkdir -p "$RUN"
  if mariadb_running; then
    log "mariadb already running on 127.0.0.1:$MARIADB_PORT"
    # a data directory from before the dev CA existed: new certificates, loaded without a restart
    if mariadb_certs; then mariadb_cli -e 'FLUSH SSL'; fi
    mariadb_grants
    return
  fi
  if [[ ! -d $MARIADB_DATA/mysql ]]; then
    log "initialising the MariaDB data directory"
    rm -rf "$MARIADB_DATA"
    mkdir -p "$MARIADB_DATA"
    mariadb-install-db --no-defaults --user=root --datadir="$MARIADB_DATA" \
      --auth-root-authentication-method=socket >"$CACHE/mariadb-init.log" 2>&1 \
      || { tail -n 20 "$CACHE/mariadb-init.log" >&2; die "mariadb-install-db failed"; }
  fi
  mariadb_certs || true
  log "starting mariadb on 127.0.0.1:$MARIADB_PORT"
  rm -f "$MARIADB_SOCK" "$MARIADB_PID"
  setsid mariadbd --no-defaults --user=root --datadir="$MARIADB_DATA" \
    --socket="$MARIADB_SOCK" --pid-file="$MARIADB_PID" --log-error="$MARIADB_LOG" \
    --bind-address=127.0.0.1 --port="$MARIADB_PORT" --server-id=2 --skip-name-resolve \
    --log-bin=mariadb-bin --binlog-format=ROW --binlog-row-image=FULL --binlog-row-metadata=FULL \
    --gtid-strict-mode=ON --ssl-cert="$MARIADB_DATA/capstan-dev-cert.pem" \
    --ssl-key="$MARIADB_DATA/capstan-dev-key.pem" --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=2 \
    --sync-binlog=0 --max-connections=500 </dev/null >/dev/null 2>&1 &
  local _
  for _ in $(seq 1 120); do
    mariadb_running && break
    sleep 0.5
  done
  mariadb_running || { tail -n 30 "$MARIADB_LOG" >&2; die "mariadb did not come up"; }
  # anonymous accounts would shadow capstan@'%' for local connections
  mariadb_cli -Nse "SELECT CONCAT('DROP USER \\'\\'@\\'', host, '\\';') FROM mysql.user WHERE user = ''" | mariadb_cli
  mariadb_grants
}

# A dev CA and a server certificate it signs, so MariaDB speaks TLS like MySQL does out of the
# box and a client can verify the chain (tls.mode verify_ca with $MARIADB_CA). The server
# certificate names capstan-dev-mariadb, not the address: verify_ca checks the chain only.
# Returns 0 when it (re)created them, 1 when they were already there.
mariadb_certs() {
  local d=$MARIADB_DATA
  if [[ -s $d/capstan-dev-ca.pem && -s $d/capstan-dev-cert.pem && -s $d/capstan-dev-key.pem ]]; then
    return 1
  fi
  need openssl openssl
  local tmp
  tmp=$(mktemp -d)
  # shellcheck disable=SC2015 # a chain of steps, any failure cleans up and dies
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=capstan-dev-mariadb-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -keyout "$tmp/ca-key.pem" -out "$tmp/ca.pem" >/dev/null 2>&1 \
    && openssl req -newkey rsa:2048 -nodes -subj /CN=capstan-dev-mariadb \
      -keyout "$tmp/key.pem" -out "$tmp/req.pem" >/dev/null 2>&1 \
    && printf '%s\n' basicConstraints=critical,CA:FALSE \
      keyUsage=critical,digitalSignature,keyEncipherment extendedKeyUsage=serverAuth \
      subjectAltName=DNS:capstan-dev-mariadb >"$tmp/ext.cnf" \
    && openssl x509 -req -in "$tmp/req.pem" -CA "$tmp/ca.pem" -CAkey "$tmp/ca-key.pem" \
      -set_serial "0x$(openssl rand -hex 8)" -days 3650 -extfile "$tmp/ext.cnf" \
      -out "$tmp/cert.pem" >/dev/null 2>&1 \
    || { rm -rf "$tmp"; die "could not create the MariaDB dev CA and certificate"; }
  mv "$tmp/ca-key.pem" "$d/capstan-dev-ca-key.pem"
  mv "$tmp/key.pem" "$d/capstan-dev-key.pem"
  mv "$tmp/cert.pem" "$d/capstan-dev-cert.pem"
  mv "$tmp/ca.pem" "$MARIADB_CA"
  rm -rf "$tmp"
  log "created the MariaDB dev CA ($MARIADB_CA) and server certificate"
}

# As mysql_grants (MariaDB's REPLICATION CLIENT is BINLOG MONITOR).
mariadb_grants() {
  mariadb_cli <<SQL
CREATE USER IF NOT EXISTS '$CAPSTAN_USER'@'%' IDENTIFIED BY '$CAPSTAN_PASSWORD';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, LOCK TABLES ON *.* TO '$CAPSTAN_USER'@'%';
CREATE USER IF NOT EXISTS '$ADMIN_USER'@'%' IDENTIFIED BY '$ADMIN_PASSWORD';
GRANT ALL ON *.* TO '$ADMIN_USER'@'%' WITH GRANT OPTION;
SQL
}

mariadb_down() {
  if mariadb_running; then
    log "stopping mariadb"
    mariadb_cli -e 'SHUTDOWN' >/dev/null 2>&1 || true
  fi
  local pid _
  pid=$(cat "$MARIADB_PID" 2>/dev/null || true)
  if [[ -n $pid ]]; then
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$MARIADB_PID"
}

# ---------------------------------------------------------------- commands

status() {
  local rc=0
  if mysql_running; then
    echo "mysql    up    127.0.0.1:$MYSQL_PORT  $(mysql_cli -Nse 'SELECT VERSION()')"
  else
    echo "mysql    down"; rc=1
  fi
  if mariadb_running; then
    echo "mariadb  up    127.0.0.1:$MARIADB_PORT  $(mariadb_cli -Nse 'SELECT VERSION()')"
  else
    echo "mariadb  down"; rc=1
  fi
  if twin_running; then
    echo "mysql-twin up  127.0.0.1:$TWIN_PORT  $(twin_cli -Nse 'SELECT VERSION()')"
  else
    echo "mysql-twin down"; rc=1
  fi
  "$KAFKA_SH" status || rc=1
  "$REGISTRY_SH" status || [[ ${CAPSTAN_REGISTRY:-1} == 0 ]] || rc=1
  return $rc
}

print_env() {
  cat <<ENV
export CAPSTAN_MYSQL_HOST=127.0.0.1
export CAPSTAN_MYSQL_PORT=$MYSQL_PORT
export CAPSTAN_MYSQL_USER=$CAPSTAN_USER
export CAPSTAN_MYSQL_PASSWORD=$CAPSTAN_PASSWORD
export CAPSTAN_MYSQL_ADMIN_USER=$ADMIN_USER
export CAPSTAN_MYSQL_ADMIN_PASSWORD=$ADMIN_PASSWORD
export CAPSTAN_MARIADB_HOST=127.0.0.1
export CAPSTAN_MARIADB_PORT=$MARIADB_PORT
export CAPSTAN_MARIADB_USER=$CAPSTAN_USER
export CAPSTAN_MARIADB_PASSWORD=$CAPSTAN_PASSWORD
export CAPSTAN_MARIADB_ADMIN_USER=$ADMIN_USER
export CAPSTAN_MARIADB_ADMIN_PASSWORD=$ADMIN_PASSWORD
export CAPSTAN_MYSQL_TWIN_PORT=$TWIN_PORT
export CAPSTAN_MYSQL_CA_FILE=$CHROOT$MYSQL_DATA/ca.pem
export CAPSTAN_MARIADB_CA_FILE=$MARIADB_CA
ENV
  "$KAFKA_SH" env
  "$REGISTRY_SH" env
}

case "${1:-}" in
  up)
    [[ $(id -u) -eq 0 ]] || die "run as root (chroot and bind mounts need it)"
    mysql_up
    twin_up
    mariadb_up
    "$KAFKA_SH" up
    if [[ ${CAPSTAN_KAFKA_CLUSTER:-1} != 0 ]]; then "$KAFKA_SH" up-cluster; fi
    if [[ ${CAPSTAN_REGISTRY:-1} != 0 ]]; then "$REGISTRY_SH" up; fi
    status
    ;;
  down)
    twin_down
    mysql_down
    mariadb_down
    "$KAFKA_SH" down
    "$REGISTRY_SH" down
    log "all servers stopped"
    ;;
  restart-mysql)
    # stop + start MySQL only (its data kept): the source tests' server-restart case
    [[ $(id -u) -eq 0 ]] || die "run as root (chroot and bind mounts need it)"
    mysql_down
    mysql_up
    ;;
  stop-mysql)
    # MySQL only, data kept, until start-mysql: the source-outage tests
    [[ $(id -u) -eq 0 ]] || die "run as root (chroot and bind mounts need it)"
    mysql_down
    ;;
  start-mysql)
    [[ $(id -u) -eq 0 ]] || die "run as root (chroot and bind mounts need it)"
    mysql_up
    ;;
  status) status ;;
  env) print_env ;;
  reset)
    twin_down
    mysql_down
    mariadb_down
    "$KAFKA_SH" reset
    "$REGISTRY_SH" reset
    rm -rf "${CHROOT:?}$MYSQL_DATA" "${CHROOT:?}$TWIN_DATA" "$MARIADB_DATA"
    log "data directories wiped"
    ;;
  *)
    echo "usage: $0 up|down|restart-mysql|status|env|reset" >&2
    exit 2
    ;;
esac
