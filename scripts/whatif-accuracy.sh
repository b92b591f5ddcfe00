#!/bin/bash
# What-if accuracy: simulate jobs, import their emitted Kineto traces, replay
# the measured configuration and compare with the measurement.
#   scripts/whatif-accuracy.sh   (after make; PIPESCOPE=path overrides the binary)
root=$(cd "$(dirname "$0")/.." && pwd)
B=${PIPESCOPE:-$root/build/release/app/cli/pipescope}
M=$root/resources/models
work=$(mktemp -d); trap "rm -rf $work" EXIT; cd "$work"
i=0
run() { i=$((i+1)); $B simulate "$@" --emit-kineto t$i >/dev/null && $B import t$i -o t$i.pipescope -q && $B whatif t$i.pipescope --json --summary > t$i.json 2>t$i.err || cat t$i.err;
  python3 - t$i.json "$*" <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); p=d['predictions'][0]; m=d['measured']
pred=p['iteration_ns']; meas=m['iteration_ns']
idle=[sum(r['bubbles_by_cause_ns'].values()) for r in p['ranks']]
mi=m.get('idle_ns_per_stage') or []
dev=max(abs(a-b)/meas*100 for a,b in zip(idle,mi)) if mi else float('nan')
print("%-50s measured %s pp%d m%d  pred %.1f ms meas %.1f ms  err %+.2f%%  max rank idle diff %.2f%% of iter" % (sys.argv[2][:50], m['schedule'], m['pp'], m['microbatches'], pred/1e6, meas/1e6, 100*(pred-meas)/meas, dev))
PY
}
run $M/gpt-32l.json --seed 1
run $M/gpt-32l.json --seed 2
run $M/gpt-32l.json --seed 3 --microbatches 16
run $M/gpt-32l.json --seed 4 --schedule gpipe
run $M/gpt-32l.json --seed 5 --pp 8 --microbatches 16
run $M/gpt-32l.json --seed 6 --pp 2 --microbatches 4
run $M/moe-24l.json --seed 7
run $M/moe-24l.json --seed 8 --dp 1
