#!/usr/bin/env bash
# Streaming throughput of the VI layer against the raw driver (issue 3), both
# drivers, interleaved over ROUNDS rounds; prints the median peak of each and
# the ratio. Needs root and an idle machine. Env: ROUNDS (3), OUT, ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
ROUNDS=${ROUNDS:-3}
go build -o "$OUT/netpipe" ./cmd/netpipe
: >"$OUT/samples"
for r in $(seq "$ROUNDS"); do
	for drv in afpacket afxdp; do
		for mod in raw vi; do
			j=$("$OUT/netpipe" -local -s -module "$mod" -driver "$drv" -l 1024 -u 1048576 -trials 3 -runtime 50ms \
				${ARGS:-} -o "$OUT/$mod-$drv-$r.out" -json 2>>"$OUT/err" | tail -1)
			echo "$j" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["module"], j["driver"], j["peak_mbps"], j["peak_bytes"])' >>"$OUT/samples"
		done
	done
done
python3 - "$OUT/samples" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m, d, mbps, _ = line.split()
    v[(m, d)].append(float(mbps))
print("| driver | raw stream peak (Mbps) | vi stream peak (Mbps) | vi / raw |")
print("|---|---|---|---|")
for d in ("afpacket", "afxdp"):
    r, x = statistics.median(v[("raw", d)]), statistics.median(v[("vi", d)])
    print("| %s | %.0f | %.0f | %.2f |" % (d, r, x, x / r))
PY
echo "samples in $OUT/samples"
