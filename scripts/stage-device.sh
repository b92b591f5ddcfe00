#!/usr/bin/env bash
# Stages what scripts/gpu-check.sh needs on a GPU machine into .device/ (ignored
# by git, carried to the machine): the CLI, both collectors, the launch-count
# test program and the SQLite library the collectors link.
#   make && scripts/stage-device.sh [build/release]
# then, on the GPU machine from the repo root: scripts/gpu-check.sh .device [CHECKS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
d=.device
for f in "$build/app/cli/pipescope" "$build/lib/pipescope/libpipescope_cupti.so" "$build/lib/pipescope/libpipescope_nccl.so"; do
  [[ -f "$f" ]] || { echo "stage-device: $f is missing; build first (make)" >&2; exit 1; }
done
rm -rf "$d"
mkdir -p "$d/bin" "$d/lib/pipescope"
cp "$build/app/cli/pipescope" "$d/bin/"
strip "$d/bin/pipescope"
cp "$build/lib/pipescope/libpipescope_cupti.so" "$build/lib/pipescope/libpipescope_nccl.so" "$d/lib/pipescope/"
/usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -o "$d/bin/launches" tests/collectors/gpu/launches.cu
cp -L /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 "$d/lib/"
du -sh "$d"
