#!/usr/bin/env bash
# Installs the Debian packages capstan's build, tests and quickstart need (idempotent: only
# what is missing, and apt-get update only then). Needs root.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(
  cmake clang libclang-dev pkg-config zlib1g-dev libzstd-dev   # rocksdb (bindgen) and librdkafka
  debootstrap                                                  # the MySQL 9.x chroot
  mariadb-server mariadb-client                                # the MariaDB dev server
  kcat                                                         # an independent Kafka client
  openssl                                                      # the MariaDB dev certificate
  curl jq                                                      # the quickstart's API calls, the registry check
  python3-venv                                                 # peer benchmarks
  maven                                                        # fetches the dev Kafka broker's jars and the registry
  iproute2 nftables socat                                      # the network partition tests' namespaces, drops and forwarders
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# A Java 17+ runtime for the dev Kafka broker (deploy/dev/kafka.sh): any one already there will do;
# else Debian's openjdk-17-jre-headless, or the release's default JRE where it has no 17 (newer).
java_version=$(java -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ { print $2 }' || true)
if [[ ${java_version%%.*} -lt 17 ]] 2>/dev/null; then
  jre=openjdk-17-jre-headless
  apt-get update -qq
  updated=1
  apt-cache show "$jre" >/dev/null 2>&1 || jre=default-jre-headless
  missing+=("$jre")
fi
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  [[ -n ${updated:-} ]] || apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
