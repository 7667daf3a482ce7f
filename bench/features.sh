#!/bin/sh
# features.sh: a vector-datatype halo exchange, a subarray face exchange
# and an MPI_Iallreduce overlapped with computation (bench/features.c),
# the same source built
# against MPICH's ABI and run over our libmpich.so.12 under mprun -np 2, and
# built against Open MPI and run over its TCP transport between two
# namespaces joined by one veth pair (bench/ompi-pair.sh),
# interleaved over ROUNDS rounds; "staged" is ours with MPLITE_LAYOUT_RDMA=0
# (long datatype messages through a staging copy). Prints every run's lines, tagged, then the
# medians. Needs root, an idle machine, Go, mpich, libmpich-dev,
# openmpi-bin, libopenmpi-dev.
#
#   bench/features.sh [ROUNDS]      (default 5)
set -eu
rounds=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/features.XXXXXX)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT INT TERM
cd "$root"
go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libmpich.so.12 -o "$work/lib/libmpich.so.12" ./cmd/libmpich
go build -o "$work/" ./cmd/mprun
mpicc.mpich -O2 -o "$work/feat.mpich" bench/features.c
mpicc.openmpi -O2 -o "$work/feat.ompi" bench/features.c
: >"$work/samples"
for r in $(seq "$rounds"); do
	LD_LIBRARY_PATH="$work/lib" "$work/mprun" -np 2 -- "$work/feat.mpich" 2>/dev/null | sed 's/^\[0\] //' |
		sed 's/^/ours /' | tee -a "$work/samples"
	MPLITE_LAYOUT_RDMA=0 LD_LIBRARY_PATH="$work/lib" "$work/mprun" -np 2 -- "$work/feat.mpich" 2>/dev/null |
		sed 's/^\[0\] //' | grep -E '^(halo|face)' | sed 's/^/staged /' | tee -a "$work/samples"
	sh bench/ompi-pair.sh "$work/feat.ompi" 2>/dev/null |
		sed 's/^/ompi /' | tee -a "$work/samples"
done
echo "== medians of $rounds rounds"
awk '{ key = $1 " " $2 " " $3; for (i = 4; i <= NF; i++) { split($i, kv, "="); v[key, kv[1], ++n[key, kv[1]]] = kv[2]; if (!((key, kv[1]) in seen)) { seen[key, kv[1]]; order[++m] = key SUBSEP kv[1] } } }
END { for (j = 1; j <= m; j++) { split(order[j], p, SUBSEP); c = n[p[1], p[2]]; for (x = 1; x <= c; x++) a[x] = v[p[1], p[2], x];
	for (x = 1; x <= c; x++) for (y = x + 1; y <= c; y++) if (a[y] < a[x]) { t = a[x]; a[x] = a[y]; a[y] = t }
	printf "%s %s=%s\n", p[1], p[2], a[int((c + 1) / 2)] } }' "$work/samples" | sort
