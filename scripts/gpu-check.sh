#!/usr/bin/env bash
# Checks `pipescope capture` on a machine with an NVIDIA GPU, from the repo root:
#   1. a CUDA program with known launches (all, and inside an NVTX trigger range)
#   2. overhead: host time per launch of a tiny kernel, and a PyTorch training loop (kernels vs
#      torch.profiler for the same steps, step time) plain, under capture and under capture variants
#      that switch parts off, interleaved; CUPTI's own overhead records summed by kind
#   3. an NCCL all-reduce across 2 processes, recorded by the NCCL plugin
#   4. a 4-stage 1F1B pipeline (one process per stage, one GPU), merged into one store
# Usage: scripts/gpu-check.sh [STAGE_DIR [CHECKS...]]   (CHECKS: 1 2 3 4, default all)
# Stage with scripts/stage-device.sh (builds nothing on the GPU machine).
# STAGE_DIR holds bin/pipescope, lib/pipescope/libpipescope_{cupti,nccl}.so, bin/launches
# (nvcc -arch=sm_90 tests/collectors/gpu/launches.cu) and, when the machine lacks
# it, lib/libsqlite3.so.0. Results go to $OUT (default /tmp/pipescope-gpu-check):
# log, and the merged stores of checks 1, 3 and 4. ROUNDS (default 2) sets the runs per
# variant in check 2; TRAIN_STEPS (default 60) the measured steps per run.
set -u -o pipefail
ROOT=$PWD
D=$(cd "${1:-.device}" && pwd)
shift || true
CHECKS=" ${*:-1 2 3 4} "
want() { [[ "$CHECKS" == *" $1 "* ]]; }
OUT=${OUT:-/tmp/pipescope-gpu-check}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log") 2>&1
export LD_LIBRARY_PATH="$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
PS="$D/bin/pipescope"
GPU="$ROOT/tests/collectors/gpu"
W=$(mktemp -d)
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*"; }
chmod +x "$PS" "$D/bin/launches" 2>/dev/null

# SQL over every capture file of a directory, summed (first column).
capq() {
    python3 - "$1" "$2" <<'PY'
import glob, sqlite3, sys
total = 0
for f in sorted(glob.glob(sys.argv[1] + "/*.pscap")):
    v = sqlite3.connect(f).execute(sys.argv[2]).fetchone()[0]
    total += v or 0
print(total)
PY
}
# One value from a store.
storeq() { python3 -c 'import sqlite3,sys; r=sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall(); print(r[0][0] if len(r)==1 and len(r[0])==1 else r)' "$1" "$2"; }
check() { # name expected actual
    if [ "$2" = "$3" ]; then echo "PASS $1: $3"; else echo "FAIL $1: expected $2, got $3"; fi
}

say "machine"
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
for f in "$PS" "$D"/lib/pipescope/*.so; do
    missing=$(ldd "$f" | grep "not found")
    [ -n "$missing" ] && echo "$f: $missing"
done
if ldd "$D/lib/pipescope/libpipescope_cupti.so" | grep -q "libcupti.*not found"; then
    cupti=$(python3 -c 'import glob, os, nvidia; print(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), "nvidia", "**", "libcupti.so.13*"), recursive=True))[0])' 2>/dev/null)
    [ -z "$cupti" ] && cupti=$(find / -name 'libcupti.so.13*' 2>/dev/null | head -1)
    echo "using $cupti"
    export LD_LIBRARY_PATH="$(dirname "$cupti"):$LD_LIBRARY_PATH"
fi

if want 1; then
say "1. CUDA program with known launches"
"$PS" capture -o "$W/c1" -- "$D/bin/launches"
check "kernels (7 + 150)" 157 "$(capq "$W/c1" "SELECT count(*) FROM gpu_activities WHERE kind = 0")"
check "memcpy" 4 "$(capq "$W/c1" "SELECT count(*) FROM gpu_activities WHERE kind = 1")"
check "memset" 2 "$(capq "$W/c1" "SELECT count(*) FROM gpu_activities WHERE kind = 2")"
check "launch calls" 157 "$(capq "$W/c1" "SELECT count(*) FROM api_calls a JOIN strings s ON s.id = a.name_id WHERE s.value LIKE 'cudaLaunchKernel%'")"
check "NVTX range" 1 "$(capq "$W/c1" "SELECT count(*) FROM nvtx_ranges r JOIN strings s ON s.id = r.name_id WHERE s.value = 'pipescope-check/measure'")"
check "kernels inside the NVTX range" 150 "$(capq "$W/c1" "SELECT count(*) FROM gpu_activities a, nvtx_ranges r JOIN strings s ON s.id = r.name_id WHERE s.value = 'pipescope-check/measure' AND a.kind = 0 AND a.start_ns >= r.start_ns AND a.end_ns <= r.end_ns")"
check "kernel clock is the host's CLOCK_REALTIME (first kernel within 10 s of start)" 1 "$(capq "$W/c1" "SELECT (SELECT min(start_ns) FROM gpu_activities) - CAST((SELECT value FROM meta WHERE key = 'start_ns') AS INTEGER) BETWEEN 0 AND 10000000000")"
check "kernels that start before their launch call (GPU and host clocks agree)" 0 "$(capq "$W/c1" "SELECT count(*) FROM gpu_activities g JOIN api_calls a ON a.correlation = g.correlation WHERE g.kind = 0 AND g.start_ns < a.start_ns")"
python3 - "$W/c1" <<'PY'
import glob, sqlite3, sys
f = sorted(glob.glob(sys.argv[1] + "/*.pscap"))[0]
for k, v in sqlite3.connect(f).execute("SELECT key, value FROM meta WHERE key LIKE 'cupti.%' ORDER BY key"):
    print("capture setting %s = %s" % (k, v))
PY
check "store kernels" 157 "$(storeq "$W/c1/job.pipescope" "SELECT count(*) FROM activities WHERE kind = 0")"
check "store kernels with their launch" 157 "$(storeq "$W/c1/job.pipescope" "SELECT count(*) FROM activities WHERE kind = 0 AND launch_id IS NOT NULL")"
"$PS" info "$W/c1/job.pipescope" | head -40
cp "$W/c1/job.pipescope" "$OUT/launches.pipescope"
"$PS" capture -q -o "$W/c2" --nvtx-range pipescope-check/measure -- "$D/bin/launches"
check "kernels with --nvtx-range" 150 "$(capq "$W/c2" "SELECT count(*) FROM gpu_activities WHERE kind = 0")"
"$PS" capture -q -o "$W/c3" --delay 30 -- "$D/bin/launches"
check "kernels with --delay 30 (program is shorter)" 0 "$(capq "$W/c3" "SELECT count(*) FROM gpu_activities WHERE kind = 0")"
fi

if want 2; then
say "2a. host time per kernel launch (tiny kernels, 20000 launches)"
: > "$W/rate"
for i in 1 2; do
    "$D/bin/launches" --rate 20000 | grep RESULT | sed "s/^/plain: /" | tee -a "$W/rate"
    "$PS" capture -q -o "$W/r$i" --no-merge -- "$D/bin/launches" --rate 20000 | grep RESULT | sed "s/^/capture: /" | tee -a "$W/rate"
    PIPESCOPE_CAPTURE_API=none "$PS" capture -q -o "$W/rn$i" --no-merge -- "$D/bin/launches" --rate 20000 | grep RESULT | sed "s/^/capture-no-api: /" | tee -a "$W/rate"
done
grep -q RESULT "$W/rate" || echo "bin/launches has no --rate mode: rebuild it from tests/collectors/gpu/launches.cu"
python3 - "$W/rate" <<'PY'
import re, statistics, sys
v = {}
for line in open(sys.argv[1]):
    m = re.match(r"([a-z-]+): RESULT.*launch_us=([0-9.]+) total_us=([0-9.]+)", line)
    if m:
        v.setdefault(m.group(1), []).append((float(m.group(2)), float(m.group(3))))
if "plain" in v:
    base = statistics.median(x[0] for x in v["plain"])
    for k, xs in v.items():
        l = statistics.median(x[0] for x in xs)
        t = statistics.median(x[1] for x in xs)
        print("SUMMARY launch %-15s %.3f us per launch (host loop), %.3f us until done; capture cost %+.3f us per launch" % (k, l, t, l - base))
PY

say "2b. PyTorch training loop: ${TRAIN_STEPS:=60} steps after 10 warm-up; ${ROUNDS:=2} rounds, variants interleaved"
export TRAIN_STEPS
: > "$W/results"
# variant name, then the environment it sets: the default capture first; the
# others each switch one part off (or, for the clock, back to the timestamp
# callback) to show what that part costs.
variants=(
    "capture|"
    "capture-no-api|PIPESCOPE_CAPTURE_API=none"
    "capture-kernels-only|PIPESCOPE_CAPTURE_KINDS=minimal PIPESCOPE_CAPTURE_API=none"
    "capture-clock-callback|PIPESCOPE_CAPTURE_CLOCK=callback"
    "capture-no-flush|PIPESCOPE_CAPTURE_FLUSH_MS=0"
)
for i in $(seq "$ROUNDS"); do
    python3 "$GPU/train_loop.py" plain | grep RESULT | sed "s/^/plain: /" | tee -a "$W/results"
    for v in "${variants[@]}"; do
        name=${v%%|*}
        env ${v#*|} "$PS" capture -q -o "$W/$name.$i" --profiler-api --no-merge -- python3 "$GPU/train_loop.py" plain | grep RESULT | sed "s/^/$name: /" | tee -a "$W/results"
        echo "$name: kernels=$(capq "$W/$name.$i" "SELECT count(*) FROM gpu_activities WHERE kind = 0") launch_calls=$(capq "$W/$name.$i" "SELECT count(*) FROM api_calls") dropped=$(capq "$W/$name.$i" "SELECT coalesce(sum(count), 0) FROM dropped")" | tee -a "$W/counts"
    done
done
python3 "$GPU/train_loop.py" profiler | grep RESULT | sed "s/^/torch.profiler: /" | tee -a "$W/results"
kernels=$(capq "$W/capture.1" "SELECT count(*) FROM gpu_activities WHERE kind = 0")
python3 - "$W/results" "$kernels" "$TRAIN_STEPS" <<'PY'
import re, statistics, sys
med = {}
for line in open(sys.argv[1]):
    m = re.match(r"([a-z.-]+): RESULT.*median_step_ms=([0-9.]+)", line)
    if m:
        med.setdefault(m.group(1), []).append(float(m.group(2)))
per_step = int(sys.argv[2]) / int(sys.argv[3]) if int(sys.argv[2]) else 0
print("kernels per step: %.1f" % per_step)
base = statistics.median(med["plain"])
for k, v in med.items():
    m = statistics.median(v)
    extra = "  %.2f us per kernel" % ((m - base) * 1000 / per_step) if per_step and k != "plain" else ""
    print("SUMMARY %-22s runs=%d median of medians %.3f ms  overhead %+.2f%%%s  (%s)" % (k, len(v), m, 100 * (m - base) / base, extra, ", ".join("%.3f" % x for x in v)))
PY

say "2c. what CUPTI reports as its own overhead (PIPESCOPE_CAPTURE_OVERHEAD=1, one run)"
PIPESCOPE_CAPTURE_OVERHEAD=1 "$PS" capture -q -o "$W/ov" --profiler-api --no-merge -- python3 "$GPU/train_loop.py" plain | grep RESULT | sed "s/^/capture-overhead-records: /"
python3 - "$W/ov" "$TRAIN_STEPS" <<'PY'
import glob, sqlite3, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.pscap")):
    db = sqlite3.connect(f)
    kernels = db.execute("SELECT count(*) FROM gpu_activities WHERE kind = 0").fetchone()[0]
    rows = db.execute("SELECT key, value FROM meta WHERE key LIKE 'cupti.overhead.%' ORDER BY key").fetchall()
    print("%s: %d kernels" % (f.split("/")[-1], kernels))
    for k, v in rows:
        per = " (%.3f us per kernel)" % (int(v) / 1000 / kernels) if k.endswith(".ns") and kernels else ""
        print("  %s = %s%s" % (k, v, per))
PY
fi

if want 3; then
say "3. NCCL all-reduce, 2 processes"
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV "$PS" capture -o "$W/c4" -- timeout 180 python3 -m torch.distributed.run --standalone --nproc-per-node=2 "$GPU/allreduce.py" 2>&1 | grep -E "RESULT|rofiler|WARN|rror|Merged|rank|pipescope" | grep -v "NCCL INFO cudaDriverVersion" | head -40
check "AllReduce ops (2 ranks x 10)" 20 "$(capq "$W/c4" "SELECT count(*) FROM nccl_ops WHERE func = 'AllReduce'")"
check "Broadcast ops (2 ranks x 5)" 10 "$(capq "$W/c4" "SELECT count(*) FROM nccl_ops WHERE func = 'Broadcast'")"
check "AllReduce bytes (2 ranks x 4 MiB)" 8388608 "$(capq "$W/c4" "SELECT max(bytes) FROM nccl_ops WHERE func = 'AllReduce'")"
if [ -f "$W/c4/job.pipescope" ]; then
    storeq "$W/c4/job.pipescope" "SELECT rank, kind, count(*), sum(activity_id IS NOT NULL), min(seq), max(seq), group_size FROM nccl_ops GROUP BY rank, kind"
    check "AllReduce ops with their kernel" 20 "$(storeq "$W/c4/job.pipescope" "SELECT count(*) FROM nccl_ops WHERE kind = 'AllReduce' AND activity_id IS NOT NULL")"
    check "ops whose kernel is of their kind" 0 "$(storeq "$W/c4/job.pipescope" "SELECT count(*) FROM nccl_ops n JOIN activities a ON a.id = n.activity_id JOIN strings s ON s.id = a.name_id WHERE instr(s.value, n.kind) = 0")"
    cp "$W/c4/job.pipescope" "$OUT/allreduce.pipescope"
fi
fi

if want 4; then
say "4. 1F1B pipeline, 4 stages on one GPU"
"$PS" capture -o "$W/c5" -- timeout 240 python3 -m torch.distributed.run --standalone --nproc-per-node=4 "$GPU/pipeline.py" 2>&1 | grep -E "RESULT|Error|error|Merged|rank|pipescope" | head -30
if [ ! -f "$W/c5/job.pipescope" ] || [ "$(storeq "$W/c5/job.pipescope" "SELECT count(*) FROM ranks")" != 4 ]; then
    echo "NCCL pipeline did not complete; retrying with gloo"
    rm -rf "$W/c5"
    CHECK_BACKEND=gloo "$PS" capture -o "$W/c5" -- timeout 240 python3 -m torch.distributed.run --standalone --nproc-per-node=4 "$GPU/pipeline.py" 2>&1 | grep -E "RESULT|Error|error|Merged|rank|pipescope" | head -30
fi
if [ -f "$W/c5/job.pipescope" ]; then
    S="$W/c5/job.pipescope"
    check "ranks" 4 "$(storeq "$S" "SELECT count(*) FROM ranks")"
    check "forward ranges (4 ranks x 3 iterations x 8 microbatches)" 96 "$(storeq "$S" "SELECT count(*) FROM cpu_ranges c JOIN strings s ON s.id = c.name_id WHERE s.value LIKE 'pipescope/forward %'")"
    check "backward ranges" 96 "$(storeq "$S" "SELECT count(*) FROM cpu_ranges c JOIN strings s ON s.id = c.name_id WHERE s.value LIKE 'pipescope/backward %'")"
    storeq "$S" "SELECT rank, count(*) FROM cpu_ranges c JOIN strings s ON s.id = c.name_id WHERE s.value LIKE 'pipescope/layer %' GROUP BY rank"
    storeq "$S" "SELECT rank, kind, count(*), sum(activity_id IS NOT NULL), group_concat(DISTINCT peer) FROM nccl_ops GROUP BY rank, kind"
    check "Send ops with a global peer" "$(storeq "$S" "SELECT count(*) FROM nccl_ops WHERE kind = 'Send'")" "$(storeq "$S" "SELECT count(*) FROM nccl_ops WHERE kind = 'Send' AND peer IS NOT NULL")"
    storeq "$S" "SELECT s.value FROM cpu_ranges c JOIN strings s ON s.id = c.name_id WHERE c.rank = 1 AND s.value LIKE 'pipescope/%' ORDER BY c.start_ns LIMIT 12"
    "$PS" info "$S" | head -40
    ls -la "$S"
    cp "$S" "$OUT/pipeline.pipescope"
fi
fi
say "done"
rm -rf "$W"
