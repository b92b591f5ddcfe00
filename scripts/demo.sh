#!/usr/bin/env bash
# `make demo`: the main job on a bundled example. With a display it opens the
# desktop app on a pipeline whose stages are unevenly loaded, so that moving a
# stage boundary pays off; without one it writes screenshots of the app, the
# analysis, the what-if answer and the HTML report under build/demo/.
#
# The job is SIMULATED (pipescope simulate of resources/models/gpt-32l.json
# with an uneven partition, written as per-rank PyTorch profiler traces and
# imported); every output says so. The real capture from an H200 is
# resources/examples/pipeline-1f1b-4stage.pipescope (File > Examples).
set -euo pipefail
build=${1:-build/release}
mode=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin="$build/app/cli/pipescope"
gui="$build/app/gui/pipescope-gui"
out="build/demo"
shots=${PIPESCOPE_DEMO_SCREENSHOTS:-$out}
mkdir -p "$out" "$shots"

model="resources/models/gpt-32l.json"
measured="6,14,24"   # layers 6 / 8 / 10 / 8 over four stages: stage 2 carries the most
label="SIMULATED 4-stage 1F1B job, 32 layers split 6/8/10/8, 16 microbatches (pipescope simulate; not a measurement)"
traces="$out/imbalanced-1f1b"
store="$out/imbalanced-1f1b.pipescope"
if [[ ! -f "$store" || "$model" -nt "$store" || "$bin" -nt "$store" ]]; then
  rm -rf "$traces" "$store"
  "$bin" simulate "$model" --pp 4 --microbatches 16 --schedule 1f1b --boundaries "$measured" \
      --iterations 3 --seed 7 --emit-kineto "$traces" > /dev/null
  "$bin" import "$traces" -o "$store" > /dev/null
fi
app_args=("$store" --model "$model" --measured-boundaries "$measured")

echo "== Example: $label"
if [[ "$mode" != "--screenshots-only" && ( -n "${DISPLAY:-}" || -n "${WAYLAND_DISPLAY:-}" ) && -x "$gui" ]]; then
  echo "Opening the desktop app. Drag a stage boundary in the What-if tab, or press Auto-balance."
  exec "$gui" "${app_args[@]}" --view whatif
fi

# No display: the same views rendered offscreen.
"$gui" --screenshot "$shots/timeline.png" --view timeline "${app_args[@]}" 2>/dev/null
"$gui" --screenshot "$shots/pipeline.png" --view pipeline "${app_args[@]}" 2>/dev/null
"$gui" --screenshot "$shots/whatif.png" --view whatif --boundaries 9,17,25 "${app_args[@]}" 2>/dev/null
if [[ "$mode" == "--screenshots-only" ]]; then
  exit 0
fi

echo
echo "== pipescope analyze $store"
"$bin" analyze "$store"
"$bin" analyze "$store" --json > "$out/analysis.json"
echo
echo "== pipescope whatif $store --model $model --measured-boundaries $measured --auto-balance"
"$bin" whatif "$store" --model "$model" --measured-boundaries "$measured" --auto-balance
"$bin" report "$store" -o "$out/report.html"
echo
echo "Screenshots of the desktop app (no display was found): $shots/timeline.png, pipeline.png, whatif.png"
echo "HTML report: $out/report.html"
echo "Open the app yourself with: $gui ${app_args[*]}"
