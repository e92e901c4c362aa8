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
  curl jq                                                      # the quickstart's API calls
  python3-venv                                                 # peer benchmarks
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
