#!/usr/bin/env bash
# Installs what the status page's browser tests need (idempotent: only what is missing). Needs
# root for the Debian packages.
# - Debian's `chromium` (the harness drives /usr/bin/chromium; no browser is downloaded), and
#   Node.js with npm if the machine has none; apt-get update runs once, only when something is
#   missing.
# - tests/browser's npm packages, exactly as package-lock.json pins them, into
#   tests/browser/node_modules (git-ignored), through npm's own cache and configured registry.
#   Skipped when node_modules was installed from the same lock.
set -euo pipefail
cd "$(dirname "$0")/../.."
export DEBIAN_FRONTEND=noninteractive
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

packages=(chromium)
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "browser-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[[ -x /usr/bin/chromium ]] || { echo "browser-deps: /usr/bin/chromium is missing" >&2; exit 1; }

cd tests/browser
stamp=node_modules/.capstan-lock.sha256
if [[ -f package-lock.json ]]; then
  want=$(sha256sum package-lock.json package.json | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
    exit 0
  fi
  echo "browser-deps: npm ci (tests/browser)" >&2
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
else
  # no lock yet: make one (without tarball addresses) from package.json's exact pins
  echo "browser-deps: npm install (tests/browser, writes package-lock.json)" >&2
  npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
    --omit-lockfile-registry-resolved
  want=$(sha256sum package-lock.json package.json | sha256sum | cut -d' ' -f1)
fi
echo "$want" >"$stamp"
