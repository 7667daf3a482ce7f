#!/usr/bin/env bash
# mplite over K bonded rails against one rail, 8 MiB ping-pong on rate-limited switch ports
# (netpipe -local -module mplite -links K -rate R): K = 1-4 at 250mbit and at 1gbit per rail, and
# unequal rails (250mbit and 500mbit, each alone and bonded). Configurations run interleaved for
# ROUNDS rounds; prints each one's median Mbps and its ratio to the goal's reference (one rail of
# the same rate; for the unequal bond, the sum of the two rails measured alone). Needs root and
# an idle machine. Env: ROUNDS (5), RATES ("250mbit 1gbit"), KS ("1 2 3 4"), DRIVER (afpacket),
# OUT (work dir).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
RATES=${RATES:-250mbit 1gbit}
KS=${KS:-1 2 3 4}
DRIVER=${DRIVER:-afpacket}
OUT=${OUT:-$(mktemp -d)}
go build -o "$OUT/netpipe" ./cmd/netpipe

configs=()
for rate in $RATES; do
	for k in $KS; do configs+=("$k:$rate"); done
done
configs+=("1:500mbit" "2:250mbit,500mbit")
[[ " $RATES " == *" 250mbit "* ]] || configs+=("1:250mbit")

: >"$OUT/samples"
for r in $(seq "$ROUNDS"); do
	for c in "${configs[@]}"; do
		k=${c%%:*}
		rate=${c#*:}
		mbps=$("$OUT/netpipe" -local -module mplite -driver "$DRIVER" -links "$k" -rate "$rate" \
			-l 8388608 -u 8388608 -p 0 -trials 3 -runtime 50ms -o '' -progress off -json 2>>"$OUT/err" |
			tail -1 | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["peak_mbps"], 1))' 2>/dev/null || echo nan)
		echo "$c ${mbps:-nan}" >>"$OUT/samples"
		echo "bond-mplite.sh: round $r $c: ${mbps:-failed} Mbps" >&2
	done
done

python3 - "$OUT/samples" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    c, v = line.split()
    runs.setdefault(c, []).append(float(v))
med = {c: statistics.median([x for x in v if x == x] or [float("nan")]) for c, v in runs.items()}
print("| links | rate per link | runs (Mbps) | median (Mbps) | reference | x reference | goal |")
print("|---|---|---|---|---|---|---|")
for c, v in runs.items():
    k, rate = c.split(":")
    k = int(k)
    if "," in rate:
        parts = rate.split(",")
        ref = sum(med.get("1:" + p, float("nan")) for p in parts)
        refname, goal = "sum of the rails alone", "0.9"
    else:
        ref = med.get("1:" + rate, float("nan"))
        refname, goal = "one rail", f"{0.9 * k:.1f}" if k > 1 else ""
    print(f"| {k} | {rate} | {' '.join(f'{x:.0f}' for x in v)} | {med[c]:.0f} | {refname} ({ref:.0f}) | {med[c] / ref:.2f} | {goal} |")
PY
