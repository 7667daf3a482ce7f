#!/usr/bin/env bash
# Collectives over two bonded NICs against one: mprun -np NP -nics K -rate RATE with collbench
# (the selector's choice, algo=auto) for K = 1 and 2, interleaved for ROUNDS rounds, medians.
# Two passes per run: every collective at the small sizes (SMALL), and Allgather, Alltoall and
# Allreduce at the large ones (LARGE). Prints coll, bytes, median us over one NIC and over two,
# and the speed-up (one NIC's time / two NICs'), then per size the geometric mean of the
# speed-ups with a bootstrap 90 % interval over the rounds; the goals are >= 1.7 at the large sizes and
# >= 1.0 (no slower) at the small ones. Each column also shows the range of its runs. Needs root
# and an idle machine.
# Env: ROUNDS (3), NP (8), RATE (100mbit), DRIVER (auto: mprun's choice), SECS (0.3 small, 3x
# for large), SMALL (1,1024), LARGE (65536,1048576; empty: no large pass), KS ("1 2": the NIC
# counts, one column each in this order, the speed-ups against the first; "2n" is two NICs without
# lanes, everything through the bond: MPLITE_BOND_LANE=0; any other letter repeats a count as a
# control, "1 2 1b" puts one NIC against itself as well, which shows the sitting's noise), OUT
# (work dir).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
NP=${NP:-8}
RATE=${RATE:-100mbit}
DRIVER=${DRIVER:-auto}
SECS=${SECS:-0.3}
SMALL=${SMALL:-1,1024}
LARGE=${LARGE-65536,1048576}
KS=${KS:-1 2}
OUT=${OUT:-$(mktemp -d)}
go build -o "$OUT/mprun" ./cmd/mprun
go build -o "$OUT/collbench" ./cmd/collbench

: >"$OUT/samples"
# Each round starts with the next configuration, so that none always runs first: in a fixed
# order one NIC run third against itself came out 6 % slower over the 1-byte points (2026-12-02,
# seven rounds; about 1.5 standard errors), as large as the effect the small sizes' goal tests.
read -ra ks <<<"$KS"
for r in $(seq "$ROUNDS"); do
	for j in "${!ks[@]}"; do
		k=${ks[$(((j + r - 1) % ${#ks[@]}))]}
		for pass in small large; do
			if [ $pass = large ] && [ -z "$LARGE" ]; then
				continue
			elif [ $pass = small ]; then
				colls=all sizes=$SMALL secs=$SECS
			else
				colls=allgather,alltoall,allreduce sizes=$LARGE secs=$(python3 -c "print(3*$SECS)")
			fi
			lane=1
			[ "$k" != "${k%n}" ] && lane=0
			nics=${k%%[a-z]*}
			MPLITE_BOND_LANE=$lane "$OUT/mprun" -np "$NP" -nics "$nics" -rate "$RATE" -driver "$DRIVER" -timeout 20m -- \
				"$OUT/collbench" -algos auto -colls "$colls" -sizes "$sizes" -secs "$secs" >"$OUT/run.out" 2>>"$OUT/err" || {
				tail -20 "$OUT/err" >&2
				echo "bond-coll.sh: collbench failed (round $r, $k NICs, $pass)" >&2
				exit 1
			}
			sed -n "s/^\[0\] coll=\([a-z]*\) algo=auto bytes=\([0-9]*\) .*us=\([0-9.]*\).*/$k \1 \2 \3/p" "$OUT/run.out" >>"$OUT/samples"
			echo "bond-coll.sh: round $r, $k NIC(s), $pass sizes done" >&2
		done
	done
done

python3 - "$OUT/samples" $KS <<'PY'
import statistics, sys
cols = sys.argv[2:]
runs = {}
order = []
for line in open(sys.argv[1]):
    k, coll, size, us = line.split()
    key = (coll, int(size))
    if key not in order:
        order.append(key)
    runs.setdefault((k, key), []).append(float(us))
names = {"1": "one NIC", "2": "two NICs", "2n": "two NICs, no lanes"}
def name(k):
    base = k.rstrip("abcdefghijklmnopqrstuvwxyz")
    return names.get(k) or f"{names.get(base, base + ' NICs')} ({k})"
head = "| coll | bytes | " + name(cols[0]) + " (us) | runs |"
for k in cols[1:]:
    head += f" {name(k)} (us) | runs | speed-up |"
print(head)
print("|---|---|---|---|" + "---|---|---|" * (len(cols) - 1))
for key in order:
    med, rng = [], []
    for k in cols:
        r = runs.get((k, key), [])
        med.append(statistics.median(r) if r else float("nan"))
        rng.append(f"{min(r):.0f}-{max(r):.0f}" if r else "-")
    row = f"| {key[0]} | {key[1]} | {med[0]:.1f} | {rng[0]} |"
    for i in range(1, len(cols)):
        row += f" {med[i]:.1f} | {rng[i]} | {med[0] / med[i]:.2f} |"
    print(row)

# Per size, the geometric mean of each column's speed-ups, with a 90 % interval from resampling
# every point's rounds (2 000 draws, fixed seed): at the small sizes the effect sought is a few
# per cent, about what one point's rounds spread.
import math, random
rng = random.Random(1)
def gmean(k, keys, pick):
    return math.exp(sum(math.log(pick(runs[(cols[0], key)]) / pick(runs[(k, key)])) for key in keys) / len(keys))
# A 1-byte request is 0 bytes for Barrier and 8 (one double) for the reductions: one class.
def cls(size):
    return 8 if size <= 8 else size
print()
for size in sorted({cls(key[1]) for key in order}):
    for k in cols[1:]:
        keys = [key for key in order if cls(key[1]) == size and (cols[0], key) in runs and (k, key) in runs]
        if not keys:
            continue
        draws = sorted(gmean(k, keys, lambda r: statistics.median(rng.choices(r, k=len(r)))) for _ in range(2000))
        label = "0-8" if size == 8 else str(size)
        print(f"{label} bytes, {name(k)}: geometric mean speed-up {gmean(k, keys, statistics.median):.3f} "
              f"over {len(keys)} points (90 % interval {draws[100]:.3f}-{draws[1899]:.3f})")
PY
