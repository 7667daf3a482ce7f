#!/usr/bin/env bash
# Collectives over two bonded NICs against one: mprun -np NP -nics K -rate RATE with collbench
# (the selector's choice, algo=auto) for K = 1 and 2, interleaved for ROUNDS rounds, medians.
# Two passes per run: every collective at the small sizes (SMALL), and Allgather, Alltoall and
# Allreduce at the large ones (LARGE). Prints coll, bytes, median us over one NIC and over two,
# and the speed-up (one NIC's time / two NICs'); the goals are >= 1.7 at the large sizes and
# >= 1.0 (no slower) at the small ones. Needs root and an idle machine.
# Env: ROUNDS (3), NP (8), RATE (100mbit), DRIVER (auto: mprun's choice), SECS (0.3 small, 3x
# for large), SMALL (1,1024), LARGE (65536,1048576; empty: no large pass), KS ("1 2": the NIC
# counts; "2n" is two NICs without lanes, everything through the bond: MPLITE_BOND_LANE=0, shown
# as a third column), OUT (work dir).
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
for r in $(seq "$ROUNDS"); do
	for k in $KS; do
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
			MPLITE_BOND_LANE=$lane "$OUT/mprun" -np "$NP" -nics "${k%n}" -rate "$RATE" -driver "$DRIVER" -timeout 20m -- \
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

python3 - "$OUT/samples" <<'PY'
import statistics, sys
runs = {}
order = []
for line in open(sys.argv[1]):
    k, coll, size, us = line.split()
    key = (coll, int(size))
    if key not in order:
        order.append(key)
    runs.setdefault((k, key), []).append(float(us))
nolane = any(k == "2n" for k, _ in runs)
extra = " two NICs, no lanes (us) | speed-up |" if nolane else ""
print("| coll | bytes | one NIC (us) | two NICs (us) | speed-up |" + extra)
print("|---|---|---|---|---|" + ("---|---|" if nolane else ""))
for key in order:
    one = statistics.median(runs.get(("1", key), [float("nan")]))
    two = statistics.median(runs.get(("2", key), [float("nan")]))
    row = f"| {key[0]} | {key[1]} | {one:.1f} | {two:.1f} | {one / two:.2f} |"
    if nolane:
        n = statistics.median(runs.get(("2n", key), [float("nan")]))
        row += f" {n:.1f} | {one / n:.2f} |"
    print(row)
PY
