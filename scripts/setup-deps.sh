#!/usr/bin/env bash
# Installs the Debian packages pipescope builds against, when any is missing.
# Idempotent and quick when everything is present (one dpkg-query call).
set -euo pipefail
packages=(build-essential cmake pkg-config qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6
          libsqlite3-dev nlohmann-json3-dev libcli11-dev zlib1g-dev sqlite3 xvfb xauth)
# `setup-deps.sh --tests` (make test, make asan): also what the test suite
# runs besides the build, e.g. a real browser for the report's render check.
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(chromium)
fi
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "setup-deps: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then sudo="sudo"; else
    echo "setup-deps: need root to install: ${missing[*]} (run: apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
