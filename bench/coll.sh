#!/usr/bin/env bash
# Collectives side by side with Open MPI, in the same sitting: first
# bench/ompi-collectives.sh (8 Open MPI ranks in 8 namespaces on one bridge, MTU 1500),
# then collbench under mprun -np 8 on the same kind of testbed (8 hosts, one bridge, MTU 1500),
# at the same points: Bcast, Allgather, Alltoall at 1 B, 1 KiB, 64 KiB, 1 MiB per rank (block),
# Allreduce of doubles with the 1 B point as 8 B. collbench times every algorithm and the
# selector's choice (algo=auto). Prints a markdown table: coll, bytes, Open MPI us, ours (auto) us,
# ratio ours/Open MPI, the measured-fastest algorithm (and its us), the selector's pick, and at the
# end the selector's accuracy: the % of (coll, size) points where auto's pick is the
# measured-fastest algorithm, and the % where the pick's median is no slower than the fastest
# algorithm's slowest round (a pick within the rounds' noise). Needs root, an idle machine, openmpi-bin and libopenmpi-dev.
# ROUNDS (3): Open MPI's script runs ROUNDS times and collbench times every point in ROUNDS
# interleaved rounds (-rounds); each side's time is the median of its rounds (single runs of one
# point swing by 20-40 % on this VM, enough to reorder algorithms).
# Env: SECS (timed seconds per point, both sides; 2), NP (8), MTU (1500), RATE (per switch port, tc
# style such as 100mbit; both sides get the same tbf: ompi-collectives.sh's RATE, mprun -rate), DUPLEX
# (1: the rate shapes what hosts send too, mprun -duplex and ompi-collectives.sh's DUPLEX),
# SYNC (1: every call timed alone after an untimed barrier, collbench -sync and
# ompi-collectives.sh's SYNC; default back-to-back calls), DRIVER (afxdp: its polls are memory reads, where AF_PACKET's are system calls),
# TUNE (collbench -tune: "measure" or a tuning file; default the built-in model), AUTH (1; 0 runs
# mprun -auth=false, unauthenticated frames on a trusted fabric, as Open MPI's TCP),
# COLLS (bcast,allgather,alltoall,allreduce), SIZES (1,1024,65536,1048576), ALGOS (collbench
# -algos: all, to find the fastest; auto times only the selector's choice, which at 16 ranks and
# 1 MiB saves most of the sitting, and leaves the fastest-algorithm columns empty),
# OMPI_OUT (reuse a file of ompi-collectives.sh output instead of running it), OUT (work dir).
# Quick check: SECS=0.05 bench/coll.sh
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
cd "$bench/.."
SECS=${SECS:-2}
ROUNDS=${ROUNDS:-3}
NP=${NP:-8}
MTU=${MTU:-1500}
RATE=${RATE:-}
DUPLEX=${DUPLEX:-0}
SYNC=${SYNC:-0}
DRIVER=${DRIVER:-afxdp}
TUNE=${TUNE:-}
AUTH=${AUTH:-1}
COLLS=${COLLS:-bcast,allgather,alltoall,allreduce}
SIZES=${SIZES:-1,1024,65536,1048576}
ALGOS=${ALGOS:-all}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
go build -o "$OUT/mprun" ./cmd/mprun
go build -o "$OUT/collbench" ./cmd/collbench

if [ -n "${OMPI_OUT:-}" ]; then
	cp "$OMPI_OUT" "$OUT/ompi.out"
else
	: >"$OUT/ompi.out"
	for r in $(seq "$ROUNDS"); do
		SECS=$SECS NP=$NP MTU=$MTU RATE=$RATE DUPLEX=$DUPLEX SYNC=$SYNC SIZES=$SIZES COLLS=$COLLS sh "$bench/ompi-collectives.sh" >>"$OUT/ompi.out" 2>"$OUT/ompi.err" || {
			cat "$OUT/ompi.err" >&2
			echo "coll.sh: ompi-collectives.sh failed (round $r)" >&2
			exit 1
		}
	done
fi
echo "coll.sh: Open MPI done ($(grep -c -E '^(coll=|ompi )' "$OUT/ompi.out") points)" >&2

tune=()
[ -n "$TUNE" ] && tune=(-tune "$TUNE")
sync=()
[ "$SYNC" = 1 ] && sync=(-sync)
rate=()
[ -n "$RATE" ] && rate=(-rate "$RATE")
[ "$DUPLEX" = 1 ] && rate+=(-duplex)
[ "$AUTH" = 0 ] && rate+=(-auth=false)
"$OUT/mprun" -np "$NP" -mtu "$MTU" "${rate[@]}" -driver "$DRIVER" -timeout 30m -- \
	"$OUT/collbench" -colls "$COLLS" -sizes "$SIZES" -algos "$ALGOS" -secs "$(python3 -c "print($SECS*$ROUNDS)")" -rounds "$ROUNDS" "${tune[@]}" "${sync[@]}" \
	>"$OUT/ours.out" 2>"$OUT/ours.err" || {
	tail -30 "$OUT/ours.err" >&2
	echo "coll.sh: collbench failed" >&2
	exit 1
}
echo "coll.sh: collbench done ($(grep -c '^\[0\] coll=' "$OUT/ours.out") lines)" >&2

python3 - "$OUT/ompi.out" "$OUT/ours.out" "$COLLS" "$OUT/ours.err" <<'PY'
import re, sys, collections
import statistics
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    # bench/ompi-collectives.sh's lines (collbench's format; older saved
    # files have "ompi NAME bytes=N ranks=P us=T")
    m = re.match(r"(?:coll=|ompi )([\w-]+)(?: algo=[\w-]+)? bytes=(\d+) ranks=(\d+) us=([\d.]+)", line)
    if m:
        runs[(m[1], int(m[2]))].append(float(m[4]))
ompi = {k: statistics.median(v) for k, v in runs.items()}
algos = collections.defaultdict(dict)  # (coll, bytes) -> algo -> us
chosen = {}
ranks = None
for line in open(sys.argv[2]):
    m = re.match(r"\[0\] coll=([\w-]+) algo=([\w-]+) bytes=(\d+) ranks=(\d+) us=([\d.]+)(?: chosen=([\w-]+))?", line)
    if not m:
        continue
    key = (m[1], int(m[3]))
    ranks = m[4]
    algos[key][m[2]] = float(m[5])
    if m[2] == "auto":
        chosen[key] = m[6]
rounds = {}  # (coll, bytes, algo) -> the rounds' times
for line in open(sys.argv[4]):
    m = re.match(r"\[0\]\s+([\w-]+)/([\w-]+) bytes=(\d+) iters=\d+ rounds\(us\)=([\d.,]+)", line)
    if m:
        rounds[(m[1], int(m[3]), m[2])] = [float(v) for v in m[4].split(",")]
order = sys.argv[3].split(",")
print("| coll | bytes | Open MPI us | ours (auto) us | ours / Open MPI | fastest algo (us) | selector's pick | pick is fastest |")
print("|---|---|---|---|---|---|---|---|")
hits = points = near = rows = 0
for key in sorted(algos, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1])):
    a = algos[key]
    real = {k: v for k, v in a.items() if k != "auto" and not k.startswith("phased_l")}
    if "auto" not in a:
        continue
    rows += 1
    pick = chosen.get(key, "?")
    fastest = verdict = "-"  # ALGOS=auto: the selector's choice alone
    if real:
        fast = min(real, key=real.get)
        ok = pick == fast
        points += 1
        hits += ok
        # within the noise: the pick's median is no slower than the fastest's
        # slowest round
        near += ok or (pick in real and real[pick] <= max(rounds.get(key + (fast,), [real[fast]])))
        fastest, verdict = "%s (%.2f)" % (fast, real[fast]), "yes" if ok else "no"
    o = ompi.get(key)
    ratio = "%.2f" % (a["auto"] / o) if o else "n/a"
    print("| %s | %d | %s | %.2f | %s | %s | %s | %s |" % (
        key[0], key[1], "%.2f" % o if o else "n/a", a["auto"], ratio, fastest, pick, verdict))
missing = sorted(k for k in ompi if k not in algos)
if missing:
    print("\nOpen MPI points collbench did not run: %s" % ", ".join("%s/%d" % k for k in missing))
if points:
    print("\nselector accuracy: %d of %d points (%.0f %%) pick the measured-fastest algorithm; %s ranks" % (
        hits, points, 100.0 * hits / points, ranks))
    print("within the noise: %d of %d points (%.0f %%) pick an algorithm whose median is no slower than the fastest's slowest round" % (
        near, points, 100.0 * near / points))
elif rows:
    print("\nthe selector's choice only (ALGOS=auto); %s ranks" % ranks)
else:
    print("\nno points")
    sys.exit(1)
PY
echo "raw output in $OUT (ompi.out, ours.out, ours.err)" >&2
