#!/usr/bin/env bash
# Reproduces the module table in docs/performance.md: netpipe -local for every
# module and driver, with NPtcp and Open MPI's NetPIPE over the same kind of
# link (one veth pair, MTU 1500) in the same sitting. Needs root, an idle
# machine, and the peers: apt-get install -y netpipe-tcp openmpi-bin netpipe-openmpi
# Env: MODULES (default "raw vi rdma mplite"), DRIVERS ("afpacket afxdp"),
# ARGS (extra netpipe flags), OUT (directory for np.out files).
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
cd "$bench/.."
OUT=${OUT:-$(mktemp -d)}
MODULES=${MODULES:-raw vi rdma mplite}
DRIVERS=${DRIVERS:-afpacket afxdp}
QUICK=${QUICK:--trials 3 -runtime 50ms}
go build -o "$OUT/netpipe" ./cmd/netpipe

peer=$(sh "$bench/tcp-baseline.sh" "$OUT/nptcp.out" | tail -1)
echo "$peer"
np_lat=$(echo "$peer" | sed -n 's/.* MTU=[0-9]* latency_us=\([0-9.]*\).*/\1/p')
np_peak=$(echo "$peer" | sed -n 's/.*peak_Mbps=\([0-9]*\).*/\1/p')
mpi=$(sh "$bench/ompi-netpipe.sh" "$OUT/ompi.out" -u 8388608 | tail -1)
echo "$mpi"
mpi_lat=$(echo "$mpi" | sed -n 's/.*latency_us=\([0-9.]*\).*/\1/p')

printf '| module | driver | 1-byte latency (µs) | x NPtcp | x Open MPI | peak (Mbps) | at bytes | x NPtcp peak |\n|---|---|---|---|---|---|---|---|\n' >"$OUT/table.md"
run() {
	mod=$1 drv=$2
	shift 2
	j=$("$OUT/netpipe" -local -full -module "$mod" -driver "$drv" $QUICK ${ARGS:-} "$@" -o "$OUT/$mod-$drv.out" -json 2>"$OUT/$mod-$drv.err" | tail -1) || {
		echo "| $mod | $drv | failed: $(tail -1 "$OUT/$mod-$drv.err") | | | | | |" >>"$OUT/table.md"
		return
	}
	echo "$j" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read()); nl, npk, ml = map(float, sys.argv[1:4])
print("| %s | %s | %.2f | %.2f | %.2f | %.0f | %d | %.2f |" % (j["module"], j["driver"], j["latency_us"],
      j["latency_us"]/nl, j["latency_us"]/ml, j["peak_mbps"], j["peak_bytes"], j["peak_mbps"]/npk))' "$np_lat" "$np_peak" "$mpi_lat" >>"$OUT/table.md"
}
run tcp afpacket
for drv in $DRIVERS; do
	for mod in $MODULES; do
		run "$mod" "$drv"
	done
done
cat "$OUT/table.md"
echo "np.out files in $OUT"
