#!/usr/bin/env bash
# Where the eager limit belongs, and whether the switch dips: runs the mplite
# module of netpipe -local with every message eager (MPLITE_EAGER_LIMIT=1 MiB),
# every message by handshake (0), and the default limit, then prints for each
# size the time of both protocols, the first size from which the handshake is
# never slower, and the throughput just below and above the default limit.
# Needs root and an idle machine. Env: DRIVER (afxdp), OUT, LIMITS.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
DRIVER=${DRIVER:-afxdp}
go build -o "$OUT/netpipe" ./cmd/netpipe
run() {
	MPLITE_EAGER_LIMIT=$1 "$OUT/netpipe" -local -full -module mplite -driver "$DRIVER" -l 1024 -u 1048576 \
		-trials 5 -runtime 50ms -o "$OUT/$2.out" 2>"$OUT/$2.err" >/dev/null
}
run 1048576 eager
run 0 handshake
run "" default
python3 - "$OUT" <<'PY'
import sys
d = sys.argv[1]
def load(name):
    pts = {}
    for line in open(f"{d}/{name}.out"):
        f = line.split()
        if len(f) >= 3:
            pts[int(f[0])] = (float(f[1]), float(f[2]))
    return pts
e, h = load("eager"), load("handshake")
sizes = sorted(set(e) & set(h))
print("| bytes | eager (µs) | handshake (µs) | handshake/eager |")
print("|---|---|---|---|")
for s in sizes:
    print("| %d | %.2f | %.2f | %.2f |" % (s, e[s][1] * 1e6, h[s][1] * 1e6, h[s][1] / e[s][1]))
cross = None
for i, s in enumerate(sizes):
    if all(h[t][1] <= e[t][1] for t in sizes[i:]):
        cross = s
        break
print("handshake never slower from", cross, "bytes")
dflt = load("default")
print("default limit, around the switch (bytes Mbps):")
for s in sorted(dflt):
    if 4096 <= s <= 131072:
        print(" ", s, "%.0f" % dflt[s][0])
PY
echo "np.out files in $OUT"
