#!/usr/bin/env bash
# capstan dev Kafka: real Apache Kafka 4.x brokers (KRaft, no ZooKeeper) on private loopback
# ports, run from the jars that Maven fetches (deploy/dev/kafka/pom.xml pins the version).
#
#   deploy/dev/kafka.sh up              start the single broker (idempotent: a running one is left alone)
#   deploy/dev/kafka.sh stop [--kill]   stop the single broker only, data kept (--kill: SIGKILL, a crash)
#   deploy/dev/kafka.sh start           start it again (same as up)
#   deploy/dev/kafka.sh up-cluster      start the 3-broker cluster (3 KRaft voters, replication factor 3)
#   deploy/dev/kafka.sh down-cluster    stop the cluster (data kept)
#   deploy/dev/kafka.sh stop-broker N [--kill]   stop broker N (1..3) of the cluster, for outage tests
#   deploy/dev/kafka.sh start-broker N  start broker N again; waits until it is back in every ISR
#   deploy/dev/kafka.sh down            stop every broker (single and cluster), data kept
#   deploy/dev/kafka.sh status          say what runs where; exit 1 if the single broker is down
#                                       (or a cluster broker, when the cluster was started)
#   deploy/dev/kafka.sh env             print the settings tests read (eval-able)
#   deploy/dev/kafka.sh reset           down, then wipe the data directories and broker logs
#                                       (the jar cache stays)
#   deploy/dev/kafka.sh class CLASS ARGS...   run a Kafka tool class on the broker's classpath,
#                                       e.g. org.apache.kafka.tools.TopicCommand --bootstrap-server ...
#
# Ports: the single broker on CAPSTAN_KAFKA_PORT (29092; its controller on the next port); the
# cluster's broker N on CAPSTAN_KAFKA_CLUSTER_PORT_BASE + 100*N (29192, 29292, 29392; each
# controller on the next port). All listen on 127.0.0.1 only, plaintext. They lie below the
# kernel's ephemeral range (32768-60999): while a broker is stopped for an outage test, the
# clients still dialling it can otherwise be handed its port as their own source port and
# connect to themselves (TCP self-connect), and the broker then cannot bind it to start again.
#
# The jars come from Maven as this machine's Maven settings configure it (no repository is named
# here) and are cached under CAPSTAN_CACHE/kafka/<version>/libs, so a rerun makes no network call
# and takes seconds. Data lives under CAPSTAN_CACHE/kafka-data, pid and log files under
# CAPSTAN_CACHE/run (kafka-<node>.log is the broker's own log, kafka-<node>.out its stdout).
# The quorum's voters (ports) are in the data: a node whose ports changed since it was formatted
# is wiped and formatted again (dev data only).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/kafka.sh
POM=$HERE/kafka/pom.xml
CACHE=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
RUN=$CACHE/run
DATA=$CACHE/kafka-data

VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
[[ -n $VERSION ]] || { echo "kafka: error: no <kafka.version> in $POM" >&2; exit 1; }
LIBS=$CACHE/kafka/$VERSION/libs

PORT=${CAPSTAN_KAFKA_PORT:-29092}
CONTROLLER_PORT=${CAPSTAN_KAFKA_CONTROLLER_PORT:-$((PORT + 1))}
CLUSTER_PORT_BASE=${CAPSTAN_KAFKA_CLUSTER_PORT_BASE:-29092}
CLUSTER_SIZE=3
# heaps: the single broker carries the tests' traffic; the cluster's brokers only the outage tests'
SINGLE_HEAP=${CAPSTAN_KAFKA_HEAP:--Xms256m -Xmx768m}
CLUSTER_HEAP=${CAPSTAN_KAFKA_CLUSTER_HEAP:--Xms128m -Xmx512m}
# fixed cluster ids (22-character base64 of 16 bytes), so a format is reproducible
SINGLE_CLUSTER_ID=Y2Fwc3Rhbi1kZXYta2ZrMQ
CLUSTER_CLUSTER_ID=Y2Fwc3Rhbi1kZXYta2ZrMw
# seconds a start may take before it counts as failed, and a graceful stop before SIGKILL
START_TIMEOUT=${CAPSTAN_KAFKA_START_TIMEOUT:-120}
STOP_TIMEOUT=${CAPSTAN_KAFKA_STOP_TIMEOUT:-60}

log() { printf 'kafka: %s\n' "$*" >&2; }
die() { printf 'kafka: error: %s\n' "$*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "missing '$1' (install: $2)"; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

# One command at a time changes the brokers (tests may call this script from parallel threads).
# The brokers themselves must not inherit the lock's descriptor: every java below gets 9>&-.
lock() {
  mkdir -p "$RUN"
  exec 9>"$RUN/kafka.lock"
  flock 9
}

# ---------------------------------------------------------------- the jars

jars() {
  if [[ -f $LIBS/.complete ]]; then return; fi
  need java "deploy/dev/install-deps.sh (openjdk-17-jre-headless)"
  need mvn "deploy/dev/install-deps.sh (maven)"
  local t0 mvnlog=$CACHE/kafka-mvn.log
  t0=$(now)
  log "fetching Apache Kafka $VERSION with Maven into $LIBS"
  rm -rf "$LIBS.partial"
  mkdir -p "$LIBS.partial"
  mvn -B -q -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$LIBS.partial" >"$mvnlog" 2>&1 9>&- \
    || { tail -n 30 "$mvnlog" >&2; die "mvn could not fetch the Kafka jars (log: $mvnlog)"; }
  [[ -s $LIBS.partial/kafka_2.13-$VERSION.jar ]] || die "mvn ran but kafka_2.13-$VERSION.jar is missing"
  touch "$LIBS.partial/.complete"
  rm -rf "$LIBS"
  mv "$LIBS.partial" "$LIBS"
  log "jars cached ($(du -sh "$LIBS" | cut -f1)) in $(since "$t0")"
}

java_ok() {
  need java "deploy/dev/install-deps.sh (openjdk-17-jre-headless)"
  local v
  v=$(java -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ { print $2 }')
  [[ ${v%%.*} -ge 17 ]] 2>/dev/null || die "Kafka $VERSION needs Java 17 or newer (found '${v:-none}')"
}

kclass() { java -Xmx256m -cp "$LIBS/*" -Dlog4j2.level=WARN "$@" 9>&-; }

# ---------------------------------------------------------------- nodes
# A node is "single" or "cluster-N" (N in 1..3): its ports, files and settings follow from the name.

node_index() { if [[ $1 == single ]]; then echo 1; else echo "${1#cluster-}"; fi; }
node_port() { if [[ $1 == single ]]; then echo "$PORT"; else echo $((CLUSTER_PORT_BASE + 100 * $(node_index "$1"))); fi; }
node_cport() { if [[ $1 == single ]]; then echo "$CONTROLLER_PORT"; else echo $(($(node_port "$1") + 1)); fi; }
node_dir() { echo "$DATA/$1"; }
node_pidfile() { echo "$RUN/kafka-$1.pid"; }

cluster_nodes() { local i; for ((i = 1; i <= CLUSTER_SIZE; i++)); do echo "cluster-$i"; done; }

cluster_bootstrap() {
  local n out=()
  for n in $(cluster_nodes); do out+=("127.0.0.1:$(node_port "$n")"); done
  (IFS=,; echo "${out[*]}")
}

node_pid() {
  local f pid
  f=$(node_pidfile "$1")
  [[ -s $f ]] || return 1
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  # the pid is this node's broker, not a recycled pid
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$(node_dir "$1")/server.properties" || return 1
  echo "$pid"
}

node_running() { node_pid "$1" >/dev/null; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# kcat's metadata as seen through one broker (empty when it does not answer)
metadata() { kcat -b "127.0.0.1:$1" -L -m 3 2>/dev/null || true; }
meta_brokers() { awk '/^ *[0-9]+ brokers:/ { print $1; exit }' <<<"$1"; }
# partitions without a leader or whose ISR is smaller than the replica set
meta_unhealthy() {
  awk '/^ *partition [0-9]+, leader/ {
         n++; split($0, a, "replicas: "); split(a[2], b, ", isrs: ")
         r = split(b[1], x, ","); i = split(b[2], y, ",")
         if ($4 ~ /^-1/ || i < r) bad++ }
       END { print bad + 0 }' <<<"$1"
}

write_config() {
  local node=$1 dir port cport voters="" rf isr n
  dir=$(node_dir "$node")
  port=$(node_port "$node")
  cport=$(node_cport "$node")
  if [[ $node == single ]]; then
    voters="1@127.0.0.1:$cport"; rf=1; isr=1
  else
    for n in $(cluster_nodes); do voters+="${voters:+,}$(node_index "$n")@127.0.0.1:$(node_cport "$n")"; done
    rf=$CLUSTER_SIZE; isr=2
  fi
  mkdir -p "$dir/log" "$RUN"
  cat >"$dir/server.properties" <<PROPS
# written by deploy/dev/kafka.sh on every start; edits are lost
process.roles=broker,controller
node.id=$(node_index "$node")
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/log
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$isr
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
group.initial.rebalance.delay.ms=0
# a 2-core dev machine
num.network.threads=2
num.io.threads=4
background.threads=4
num.recovery.threads.per.data.dir=1
log.retention.hours=24
PROPS
  cat >"$dir/log4j2.properties" <<PROPS
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = $RUN/kafka-$node.log
appender.file.filePattern = $RUN/kafka-$node.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 64MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
PROPS
}

# The ports a node is configured for now, as recorded at its format.
node_ports() { echo "$(node_port "$1") $(node_cport "$1") $CLUSTER_PORT_BASE $PORT"; }

# A running node started with other ports than the configured ones (an older checkout, or a
# changed CAPSTAN_KAFKA_*PORT*): stop it, so it is formatted and started again on the new ones.
stop_if_stale() {
  local node=$1
  if node_running "$node" && [[ $(cat "$(node_dir "$node")/ports" 2>/dev/null) != "$(node_ports "$node")" ]]; then
    log "$node runs on other ports than configured: restarting it"
    stop_nodes "$node"
  fi
}

format_storage() {
  local node=$1 dir id
  dir=$(node_dir "$node")
  local ports
  ports=$(node_ports "$node")
  if [[ -s $dir/log/meta.properties ]]; then
    [[ $(cat "$dir/ports" 2>/dev/null) == "$ports" ]] && return
    log "the ports of $node changed since it was formatted: wiping its dev data"
    rm -rf "$dir/log"
  fi
  if [[ $node == single ]]; then id=$SINGLE_CLUSTER_ID; else id=$CLUSTER_CLUSTER_ID; fi
  log "formatting the KRaft storage of $node ($dir/log)"
  kclass kafka.tools.StorageTool format --cluster-id "$id" --config "$dir/server.properties" \
    >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "kafka-storage format failed for $node"; }
  echo "$ports" >"$dir/ports"
}

# Start one node's JVM in the background, without waiting for it.
launch() {
  local node=$1 dir heap
  dir=$(node_dir "$node")
  if [[ $node == single ]]; then heap=$SINGLE_HEAP; else heap=$CLUSTER_HEAP; fi
  write_config "$node"
  format_storage "$node"
  # where this run's lines begin in the (appended) broker log, for log_errors
  if [[ -f $RUN/kafka-$node.log ]]; then wc -l <"$RUN/kafka-$node.log"; else echo 0; fi >"$RUN/kafka-$node.logstart"
  log "starting $node on 127.0.0.1:$(node_port "$node") (controller :$(node_cport "$node"))"
  # shellcheck disable=SC2086 # the heap settings are several words
  nohup setsid java $heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" -Dkafka.logs.dir="$RUN" \
    -cp "$LIBS/*" kafka.Kafka "$dir/server.properties" \
    </dev/null >>"$RUN/kafka-$node.out" 2>&1 9>&- &
  echo $! >"$(node_pidfile "$node")"
}

# Wait until every given node accepts connections, answers metadata listing `want` brokers, and
# (with healthy=1) no partition lacks a leader or a full ISR.
await() {
  local want=$1 healthy=$2 node m deadline
  shift 2
  deadline=$((SECONDS + START_TIMEOUT))
  for node in "$@"; do
    while :; do
      # the pid file's process alive (its command line is java's only once nohup and setsid exec'd)
      kill -0 "$(cat "$(node_pidfile "$node")" 2>/dev/null || echo 0)" 2>/dev/null || { tail -n 40 "$RUN/kafka-$node.log" "$RUN/kafka-$node.out" >&2 2>/dev/null; die "$node exited while starting (logs: $RUN/kafka-$node.log, .out)"; }
      if port_open "$(node_port "$node")"; then
        m=$(metadata "$(node_port "$node")")
        if [[ $(meta_brokers "$m") == "$want" ]] && { ((healthy == 0)) || [[ $(meta_unhealthy "$m") == 0 ]]; }; then
          break
        fi
      fi
      ((SECONDS < deadline)) || die "$node did not come up within ${START_TIMEOUT}s (log: $RUN/kafka-$node.log)"
      sleep 0.5
    done
  done
}

# ERROR lines the broker logged since its last launch, less the controllers' NotControllerException
# while a fresh quorum elects its first leader (retried, harmless)
log_errors() {
  local node=$1 from n
  from=$(cat "$RUN/kafka-$node.logstart" 2>/dev/null || echo 0)
  n=$(awk -v from="$from" 'NR > from {
        if (err != "" && $0 !~ /NotControllerException/) bad++
        err = ($0 ~ /^\[[^]]*\] ERROR /) ? $0 : "" }
      END { if (err != "") bad++; print bad + 0 }' "$RUN/kafka-$node.log" 2>/dev/null || echo 0)
  if ((n > 0)); then log "warning: $node has logged $n ERROR line(s) since it started, see $RUN/kafka-$node.log"; fi
}

stop_nodes() {
  local sig=TERM node pid pids=() names=() i
  if [[ ${1:-} == --kill ]]; then sig=KILL; shift; fi
  for node in "$@"; do
    if pid=$(node_pid "$node"); then
      log "stopping $node (pid $pid, SIG$sig)"
      kill -"$sig" "$pid" 2>/dev/null || true
      pids+=("$pid"); names+=("$node")
    fi
    rm -f "$(node_pidfile "$node")"
  done
  # all at once: a cluster stopped one by one would leave its last broker without a quorum
  for i in "${!pids[@]}"; do
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "${pids[$i]}" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      log "${names[$i]} did not stop within ${STOP_TIMEOUT}s: SIGKILL"
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
  done
}

# ---------------------------------------------------------------- commands

single_up() {
  local t0
  t0=$(now)
  stop_if_stale single
  if node_running single && [[ -n $(meta_brokers "$(metadata "$PORT")") ]]; then
    log "single broker already running on 127.0.0.1:$PORT"; return
  fi
  need kcat "deploy/dev/install-deps.sh (kcat)"
  jars
  java_ok
  node_running single || launch single
  await 1 0 single
  log_errors single
  log "single broker (Kafka $VERSION) up on 127.0.0.1:$PORT in $(since "$t0")"
}

cluster_up() {
  local t0 node started=()
  t0=$(now)
  need kcat "deploy/dev/install-deps.sh (kcat)"
  for node in $(cluster_nodes); do stop_if_stale "$node"; done
  for node in $(cluster_nodes); do node_running "$node" || started+=("$node"); done
  if ((${#started[@]} == 0)); then
    log "cluster already running on $(cluster_bootstrap)"
    return
  fi
  jars
  java_ok
  touch "$DATA/cluster.wanted"
  for node in "${started[@]}"; do launch "$node"; done
  # every broker listed by each, and the internal topics (if any yet) fully replicated
  # shellcheck disable=SC2046 # node names are single words
  await "$CLUSTER_SIZE" 1 $(cluster_nodes)
  for node in "${started[@]}"; do log_errors "$node"; done
  log "cluster (Kafka $VERSION, ${#started[@]} broker(s) started) up on $(cluster_bootstrap) in $(since "$t0")"
}

broker_arg() {
  if [[ ! ${1:-} =~ ^[1-9][0-9]*$ ]] || (($1 > CLUSTER_SIZE)); then
    die "broker number 1..$CLUSTER_SIZE expected, got '${1:-}'"
  fi
}

status() {
  local rc=0 node pid rss
  for node in single $(cluster_nodes); do
    if pid=$(node_pid "$node"); then
      rss=$(awk '/^VmRSS/ { printf "%d MiB", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || true)
      if [[ -n $(meta_brokers "$(metadata "$(node_port "$node")")") ]]; then
        printf 'kafka-%-9s up    127.0.0.1:%s  Kafka %s  pid %s  rss %s\n' "$node" "$(node_port "$node")" "$VERSION" "$pid" "$rss"
      else
        printf 'kafka-%-9s starting or hung (pid %s, no metadata on 127.0.0.1:%s)\n' "$node" "$pid" "$(node_port "$node")"
        rc=1
      fi
    else
      printf 'kafka-%-9s down\n' "$node"
      if [[ $node == single || -e $DATA/cluster.wanted ]]; then rc=1; fi
    fi
  done
  return $rc
}

print_env() {
  cat <<ENV
export CAPSTAN_KAFKA_BOOTSTRAP=127.0.0.1:$PORT
export CAPSTAN_KAFKA_CLUSTER_BOOTSTRAP=$(cluster_bootstrap)
export CAPSTAN_KAFKA_SCRIPT=$SELF
export CAPSTAN_KAFKA_VERSION=$VERSION
ENV
}

case "${1:-}" in
  up | start) lock; single_up ;;
  stop) lock; stop_nodes "${@:2}" single ;;
  up-cluster) lock; cluster_up ;;
  down-cluster)
    lock
    # shellcheck disable=SC2046
    stop_nodes $(cluster_nodes)
    rm -f "$DATA/cluster.wanted"
    ;;
  stop-broker)
    broker_arg "${2:-}"; lock
    if [[ ${3:-} == --kill ]]; then stop_nodes --kill "cluster-$2"; else stop_nodes "cluster-$2"; fi
    ;;
  start-broker)
    broker_arg "${2:-}"; lock
    t0=$(now)
    if ! node_running "cluster-$2"; then jars; java_ok; launch "cluster-$2"; fi
    await "$CLUSTER_SIZE" 1 "cluster-$2"
    log_errors "cluster-$2"
    log "cluster-$2 up on 127.0.0.1:$(node_port "cluster-$2"), every ISR full, in $(since "$t0")"
    ;;
  down)
    lock
    # shellcheck disable=SC2046
    stop_nodes single $(cluster_nodes)
    rm -f "$DATA/cluster.wanted"
    log "all brokers stopped"
    ;;
  status) status ;;
  env) print_env ;;
  reset)
    lock
    # shellcheck disable=SC2046
    stop_nodes single $(cluster_nodes)
    rm -rf "$DATA"
    rm -f "$RUN"/kafka-*.log "$RUN"/kafka-*.log.[0-9] "$RUN"/kafka-*.out "$RUN"/kafka-*.logstart
    log "Kafka data directories and logs wiped (jar cache kept: $CACHE/kafka)"
    ;;
  class)
    [[ -n ${2:-} ]] || die "usage: $0 class CLASS [ARGS...]"
    jars
    kclass "${@:2}"
    ;;
  *)
    echo "usage: $0 up|start|stop [--kill]|up-cluster|down-cluster|stop-broker N [--kill]|start-broker N|down|status|env|reset|class CLASS ARGS..." >&2
    exit 2
    ;;
esac
