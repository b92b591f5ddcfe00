#!/usr/bin/env bash
# Installs the Debian packages pipescope builds against, when any is missing.
# Idempotent and quick when everything is present (one dpkg-query call).
set -euo pipefail
packages=(build-essential cmake pkg-config qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6
          libsqlite3-dev nlohmann-json3-dev libcli11-dev zlib1g-dev sqlite3 xvfb xauth)
# `setup-deps.sh --tests` (make test, make asan): also what the test suite
# runs besides the build, e.g. a real browser for the report's render check.
# openssh-server: the remote test runs `pipescope serve` through a real sshd
# that it starts itself, on 127.0.0.1 with a key of its own (tests/remote/tst_serve_ssh.cpp).
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(chromium openssh-server)
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
# A package with a daemon (openssh-server) must not start it, nor ask
# anything: policy-rc.d answering 101 tells invoke-rc.d "not now" (as
# Debian's container images ship it); one that is not there is added for the
# install and removed after it. Configuration files keep what is there.
policy=/usr/sbin/policy-rc.d
added_policy=""
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\n# setup-deps.sh: no daemon starts while packages install\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  added_policy=1
  trap '[[ -n $added_policy ]] && $sudo rm -f "$policy"' EXIT
fi
install=(apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
if ! $sudo env DEBIAN_FRONTEND=noninteractive "${install[@]}" "${missing[@]}"; then
  $sudo apt-get update
  $sudo env DEBIAN_FRONTEND=noninteractive "${install[@]}" "${missing[@]}"
fi
# The test starts an sshd of its own; an sshd installed for it stays off at
# boot too (where systemd runs; a container has none to start it).
if [[ " ${missing[*]} " == *" openssh-server "* ]] && [[ -d /run/systemd/system ]]; then
  $sudo systemctl disable --now ssh.service ssh.socket >/dev/null 2>&1 || true
fi
