#!/usr/bin/env bash
# Jobs of many ranks, one per host namespace (or PPN), on this machine: the wall time of
# examples/hello under mprun (launch to exit, testbed included), the start-up time (from
# the ranks' launch, the namespaces made, to the end of Init on every rank: collbench's
# and ompi_coll.c's first line) and an 8-byte Allreduce against Open MPI's (bench/ompi-collectives.sh, the same layout: one
# rank per namespace on one bridge), interleaved over ROUNDS rounds, medians.
# Also each rank's peak RSS at the largest NP. Needs root, an idle machine,
# openmpi-bin and libopenmpi-dev. Env: NPS ("64 128"), ROUNDS (3), OUT,
# OMPI_LIMIT (seconds Open MPI gets per point, 120; a point it misses is
# reported as such), PPN (1: ranks per host namespace, sharing its NIC; Open
# MPI gets the same layout, with its shared memory between a namespace's ranks).
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
cd "$bench/.."
OUT=${OUT:-$(mktemp -d)}
NPS=${NPS:-64 128}
ROUNDS=${ROUNDS:-3}
OMPI_LIMIT=${OMPI_LIMIT:-120}
PPN=${PPN:-1}
for b in mprun collbench; do go build -o "$OUT/$b" "./cmd/$b"; done
go build -o "$OUT/hello" ./examples/hello
: >"$OUT/samples"
for r in $(seq "$ROUNDS"); do
	for np in $NPS; do
		s=$(date +%s.%N)
		"$OUT/mprun" -np "$np" -ppn "$PPN" "$OUT/hello" >"$OUT/hello.out" 2>&1
		e=$(date +%s.%N)
		got=$(grep -c "hello from" "$OUT/hello.out" || true)
		[ "$got" = $((np - 1)) ] || { echo "hello -np $np: $got greetings" >&2; exit 1; }
		echo "hello $np $(echo "$e - $s" | bc)" >>"$OUT/samples"
		"$OUT/mprun" -np "$np" -ppn "$PPN" "$OUT/collbench" -colls allreduce -algos auto -sizes 8 -secs 2 -warmup 1s >"$OUT/cb.out" 2>&1
		us=$(sed -n 's/^\[0\] coll=allreduce .* us=\([0-9.]*\).*/\1/p' "$OUT/cb.out")
		echo "allreduce $np $us" >>"$OUT/samples"
		us=$(sed -n 's/^\[0\] startup ranks=[0-9]* us=\([0-9.]*\).*/\1/p' "$OUT/cb.out")
		echo "startup $np $us" >>"$OUT/samples"
		# Open MPI gets OMPI_LIMIT seconds: at 128 ranks on 2 CPUs it
		# did not finish in 10 minutes.
		NP=$np PPN=$PPN SIZES=1 COLLS=allreduce SECS=2 LIMIT=$OMPI_LIMIT sh "$bench/ompi-collectives.sh" >"$OUT/ompi.out" 2>/dev/null || true
		us=$(sed -n 's/.*coll=allreduce.* us=\([0-9.]*\).*/\1/p' "$OUT/ompi.out")
		[ -n "$us" ] && echo "ompi-allreduce $np $us" >>"$OUT/samples"
		us=$(sed -n 's/^startup ranks=[0-9]* us=\([0-9.]*\).*/\1/p' "$OUT/ompi.out")
		[ -n "$us" ] && echo "ompi-startup $np $us" >>"$OUT/samples"
	done
	echo "round $r done" >&2
done
np=${NPS##* }
"$OUT/mprun" -np "$np" -ppn "$PPN" /usr/bin/time -f "rss_kb=%M" "$OUT/collbench" -colls allreduce -algos auto -sizes 8 -iters 20 -warmup 0 2>&1 |
	sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p' | sort -n | awk -v np="$np" '{a[NR]=$1} END {print "rss_kb", np, a[int((NR+1)/2)], a[NR]}' >>"$OUT/samples"
python3 - "$OUT/samples" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
rss = None
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "rss_kb":
        rss = f
        continue
    rows[(f[0], int(f[1]))].append(float(f[2]))
for np in sorted({k[1] for k in rows}):
    h = statistics.median(rows[("hello", np)])
    start = statistics.median(rows[("startup", np)]) / 1e6
    ours = statistics.median(rows[("allreduce", np)])
    line = f"np={np} hello_s={h:.2f} startup_s={start:.2f}"
    peers = rows.get(("ompi-startup", np))
    if peers:
        peer = statistics.median(peers) / 1e6
        line += f" ompi_startup_s={peer:.2f} startup_ratio={start/peer:.2f}"
    line += f" allreduce_us={ours:.0f}"
    peers = rows.get(("ompi-allreduce", np))
    if not peers:
        print(line + " ompi_allreduce_us=none (did not finish)")
        continue
    peer = statistics.median(peers)
    print(line + f" ompi_allreduce_us={peer:.0f} ({len(peers)} of {len(rows[('hello', np)])} finished) ratio={ours/peer:.2f}")
if rss:
    print(f"np={rss[1]} rank_rss_kb median={rss[2]} max={rss[3]}")
PY
