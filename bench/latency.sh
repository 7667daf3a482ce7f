#!/usr/bin/env bash
# 1-byte latency of every module and driver, interleaved over ROUNDS rounds so that
# a noisy neighbour hits all of them alike, with the peers (NPtcp and Open MPI's
# NetPIPE: bench/tcp-baseline.sh, bench/ompi-netpipe.sh) in the same sitting. Prints the median per module and
# driver and its ratio to each peer. Needs root, an idle machine and the peers
# (apt-get install -y netpipe-tcp openmpi-bin netpipe-openmpi).
# Env: ROUNDS (5), MODULES ("raw vi rdma mplite"), DRIVERS ("afpacket afxdp"), OUT.
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
cd "$bench/.."
OUT=${OUT:-$(mktemp -d)}
ROUNDS=${ROUNDS:-5}
MODULES=${MODULES:-raw vi rdma mplite}
DRIVERS=${DRIVERS:-afpacket afxdp}
go build -o "$OUT/netpipe" ./cmd/netpipe

peer=$(sh "$bench/tcp-baseline.sh" | tail -1)
echo "$peer"
np_lat=$(echo "$peer" | sed -n 's/.* MTU=[0-9]* latency_us=\([0-9.]*\).*/\1/p')
# Open MPI: the median 1-byte latency of three short runs.
: >"$OUT/mpi.lat"
for r in 1 2 3; do
	sh "$bench/ompi-netpipe.sh" "$OUT/ompi.out" -l 1 -u 64 | sed -n 's/.*latency_us=\([0-9.]*\).*/\1/p' >>"$OUT/mpi.lat"
done
mpi_lat=$(sort -n "$OUT/mpi.lat" | sed -n 2p)
echo "NPmpi latency_us=$mpi_lat (median of 3: $(tr '\n' ' ' <"$OUT/mpi.lat"))"

: >"$OUT/samples"
for r in $(seq "$ROUNDS"); do
	for drv in $DRIVERS; do
		for mod in tcp $MODULES; do
			[ "$mod" = tcp ] && [ "$drv" != "${DRIVERS%% *}" ] && continue
			j=$("$OUT/netpipe" -local -module "$mod" -driver "$drv" -l 1 -u 16 -trials 5 -runtime 100ms \
				-o "$OUT/$mod-$drv.out" -json 2>>"$OUT/err" | tail -1)
			echo "$j" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["module"], j["driver"], j["latency_us"])' >>"$OUT/samples"
		done
	done
	echo "round $r done" >&2
done
python3 - "$OUT/samples" "$np_lat" "$mpi_lat" <<'PY'
import sys, statistics, collections
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    m, d, v = line.split()
    rows.setdefault((m, d), []).append(float(v))
nl, ml = float(sys.argv[2]), float(sys.argv[3])
print("| module | driver | median 1-byte latency (µs) | min | max | x NPtcp (%.2f) | x Open MPI (%.2f) |" % (nl, ml))
print("|---|---|---|---|---|---|---|")
for (m, d), v in rows.items():
    med = statistics.median(v)
    print("| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |" % (m, d, med, min(v), max(v), med / nl, med / ml))
PY
echo "samples in $OUT/samples"
