#!/usr/bin/env bash
# Channel bonding (issue 8): netpipe -local -links K for K = 1..4 at RATE per
# link (default 1gbit), the vi module, streaming peak and 1-byte latency, in
# one sitting; prints each K's peak against K x the one-link peak. Needs root
# and an idle machine. Env: RATE, KS ("1 2 3 4"), DRIVER (afpacket), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
RATE=${RATE:-1gbit}
KS=${KS:-1 2 3 4}
DRIVER=${DRIVER:-afpacket}
go build -o "$OUT/netpipe" ./cmd/netpipe
: >"$OUT/samples"
for k in $KS; do
	peak=$("$OUT/netpipe" -local -module vi -driver "$DRIVER" -links "$k" -rate "$RATE" -s -l 65536 -u 8388608 \
		-trials 3 -runtime 50ms -o "$OUT/peak-$k.out" -json 2>>"$OUT/err" | tail -1)
	lat=$("$OUT/netpipe" -local -module vi -driver "$DRIVER" -links "$k" -rate "$RATE" -l 1 -u 16 \
		-trials 5 -runtime 100ms -o "$OUT/lat-$k.out" -json 2>>"$OUT/err" | tail -1)
	echo "$k $(echo "$peak" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["peak_mbps"])') $(echo "$lat" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["latency_us"])')" >>"$OUT/samples"
done
python3 - "$OUT/samples" "$RATE" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
one = {r[0]: (float(r[1]), float(r[2])) for r in rows}
p1, l1 = one.get("1", (None, None))
print("| links | stream peak (Mbps) at %s each | x one link | target 0.9 K | 1-byte latency (µs) | x one link |" % sys.argv[2])
print("|---|---|---|---|---|---|")
for k, p, l in rows:
    p, l = float(p), float(l)
    print("| %s | %.0f | %s | %.1f | %.2f | %s |" % (k, p, "%.2f" % (p / p1) if p1 else "-", 0.9 * int(k), l, "%.2f" % (l / l1) if l1 else "-"))
PY
echo "np.out files in $OUT"
