#!/usr/bin/env bash
# Builds capstan's release binary and puts it, with its SHA-256 checksum, in dist/:
#
#   deploy/release.sh        prints the path of the binary it wrote
#
#   dist/capstan-<version>-<target>          the binary (`capstan --version` names the version)
#   dist/capstan-<version>-<target>.sha256   its checksum (`cd dist && sha256sum -c *.sha256`)
#
# The build needs the system packages of deploy/dev/install-deps.sh (cmake, clang,
# libclang-dev, pkg-config, zlib1g-dev, libzstd-dev: RocksDB and librdkafka are compiled from
# source); a first build takes 15-20 minutes on two cores. The target directory is kept apart
# from the debug builds' (CARGO_TARGET_DIR, default ~/.cache/capstan/target-release) so a
# release build never invalidates the tests' build. The binary links the system's glibc,
# libstdc++, zlib and libzstd dynamically: run it on the same distribution release it was built
# on, or use the container (deploy/container/Containerfile).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/capstan/target-release}

log() { printf 'release: %s\n' "$*" >&2; }
die() { printf 'release: error: %s\n' "$*" >&2; exit 1; }

command -v cargo >/dev/null || die "cargo is missing (a Rust toolchain is needed)"
# the commit capstan_build_info names: only from a clean git checkout (a source tarball or a
# tree with local changes has no commit that describes it)
if [[ -z ${CAPSTAN_GIT_COMMIT:-} ]] && commit=$(git rev-parse HEAD 2>/dev/null) &&
  git diff --quiet HEAD -- 2>/dev/null; then
  export CAPSTAN_GIT_COMMIT=$commit
  log "commit $commit"
fi
# --locked: a release is built from exactly the dependency versions in Cargo.lock
log "building the release binary (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo build --release --locked -p capstan-worker --bin capstan

built=$CARGO_TARGET_DIR/release/capstan
[[ -x $built ]] || die "cargo succeeded but $built is missing"
version=$("$built" --version | awk '{ print $2 }')
[[ -n $version ]] || die "'$built --version' printed no version"
target=$(rustc -vV | sed -n 's/^host: //p')
[[ -n $target ]] || die "rustc -vV named no host target"

name=capstan-$version-$target
mkdir -p dist
# a new file, then a rename: a reader of dist/ never sees half a binary
cp "$built" "dist/.$name.partial"
chmod 0755 "dist/.$name.partial"
mv -f "dist/.$name.partial" "dist/$name"
(cd dist && sha256sum "$name" >"$name.sha256")
log "checksum: $(cat "dist/$name.sha256")"
printf '%s\n' "$(pwd)/dist/$name"
