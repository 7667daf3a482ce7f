#!/usr/bin/env bash
# Channel bonding (issue 8): netpipe -local -links K for K = 1..4 at RATE per
# link (default 1gbit), in one sitting. For each module in MODULES (vi, the
# bonded VI itself; mplite, a two-rank world bonded over the links): the
# streaming peak (one run per K), and the 1-byte latency as the median of
# ROUNDS runs interleaved over K (single runs swing 2-6x on this VM). Prints
# each K's peak and latency against one link's. Needs root and an idle
# machine. Env: RATE, KS ("1 2 3 4"; "1b" is one link through the bonding
# layer, netpipe -bond, vi only: it tells the bond's own cost from the
# links'),
# MODULES ("vi"), ROUNDS (5), PEAK_ROUNDS (1: with more, the peak reported
# is the median of that many streaming runs, interleaved over K), DRIVER
# (afpacket), MTU (1500; AF_XDP on veth takes at most 3506), OUT. Besides
# the peak (NetPIPE's maximum over sizes, which tbf's 5 ms bucket inflates
# for messages of a few hundred KiB per link), the table gives the rate at
# the largest size, 8 MiB, where the bucket hardly counts. With 1b in KS the
# last column gives each K's latency against the bond over one link.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
RATE=${RATE:-1gbit}
KS=${KS:-1 2 3 4}
MODULES=${MODULES:-vi}
ROUNDS=${ROUNDS:-5}
PEAK_ROUNDS=${PEAK_ROUNDS:-1}
DRIVER=${DRIVER:-afpacket}
MTU=${MTU:-1500}
go build -o "$OUT/netpipe" ./cmd/netpipe
# json reads netpipe's result line once netpipe has finished: started in the
# same pipeline, python's start-up (tens of ms of CPU) competed with the
# pinned ends for the two CPUs and made every latency run's first point,
# the 1-byte latency, 3-20x slower.
json() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }
links() { if [ "$1" = 1b ]; then echo "-links 1 -bond"; else echo "-links $1"; fi; }
# np MODULE K FIELD ARGS...: one netpipe -local run of MODULE over K links;
# prints "MODULE K value-of-FIELD" from its result line.
np() {
	local m=$1 k=$2 field=$3 j
	shift 3
	# shellcheck disable=SC2046 # links expands to two or three flags
	j=$("$OUT/netpipe" -local -full -module "$m" -driver "$DRIVER" -mtu "$MTU" $(links "$k") -rate "$RATE" "$@" -json 2>>"$OUT/err")
	echo "$m $k $(echo "$j" | tail -1 | json "$field")"
}
: >"$OUT/peaks"
: >"$OUT/big"
: >"$OUT/lats"
for r in $(seq "$PEAK_ROUNDS"); do
	for m in $MODULES; do
		for k in $KS; do
			np "$m" "$k" peak_mbps -s -l 65536 -u 8388608 -trials 3 -runtime 50ms -o "$OUT/peak-$m-$k-$r.out" >>"$OUT/peaks"
			echo "$m $k $(tail -1 "$OUT/peak-$m-$k-$r.out" | awk '{print $2}')" >>"$OUT/big"
		done
	done
done
for r in $(seq "$ROUNDS"); do
	for m in $MODULES; do
		for k in $KS; do
			np "$m" "$k" latency_us -l 1 -u 16 -trials 5 -runtime 100ms -o "$OUT/lat-$m-$k-$r.out" >>"$OUT/lats"
		done
	done
done
python3 - "$OUT/peaks" "$OUT/lats" "$RATE" "$OUT/big" <<'PY'
import sys, statistics, collections
peaks = collections.defaultdict(list)
for m, k, v in (l.split() for l in open(sys.argv[1])):
    peaks[(m, k)].append(float(v))
peak = {mk: statistics.median(v) for mk, v in peaks.items()}
bigs = collections.defaultdict(list)
for m, k, v in (l.split() for l in open(sys.argv[4])):
    bigs[(m, k)].append(float(v))
big = {mk: statistics.median(v) for mk, v in bigs.items()}
lats = collections.defaultdict(list)
for m, k, v in (l.split() for l in open(sys.argv[2])):
    lats[(m, k)].append(float(v))
print("| module | links | stream peak (Mbps) at %s each, median | runs | x one link | target 0.9 K | at 8 MiB (Mbps) | x one link | 1-byte latency, median (µs) | min | max | x one link | x bonded link (1b) |" % sys.argv[3])
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (m, k), p in peak.items():
    p1 = peak.get((m, "1"))
    ls = lats[(m, k)]
    l = statistics.median(ls)
    l1 = statistics.median(lats[(m, "1")]) if lats.get((m, "1")) else None
    # K rails against the bond over one link: what more rails cost, apart
    # from what the bond itself costs.
    lb = statistics.median(lats[(m, "1b")]) if lats.get((m, "1b")) else None
    b, b1 = big[(m, k)], big.get((m, "1"))
    print("| %s | %s | %.0f | %s | %s | %.1f | %.0f | %s | %.2f | %.2f | %.2f | %s | %s |" % (m, k, p, " ".join("%.0f" % x for x in peaks[(m, k)]), "%.2f" % (p / p1) if p1 else "-",
          0.9 * int(k.rstrip("b")), b, "%.2f" % (b / b1) if b1 else "-", l, min(ls), max(ls), "%.2f" % (l / l1) if l1 else "-",
          "%.2f" % (l / lb) if lb and k != "1" else "-"))
PY
echo "np.out files in $OUT"
