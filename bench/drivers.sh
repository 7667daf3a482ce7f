#!/usr/bin/env bash
# Reproduces the driver numbers in docs/performance.md: the peers (NPtcp and
# Open MPI's NetPIPE over one veth pair) and both kernel drivers' benchmarks
# over one veth pair, in one sitting. Needs root and an idle machine.
# Peers (bench/tcp-baseline.sh, bench/ompi-netpipe.sh):
# apt-get install -y netpipe-tcp openmpi-bin netpipe-openmpi
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
cd "$bench/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
N=${N:-200000}

idle() {
	a=$(awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
	sleep 1
	b=$(awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
	echo "$a $b" | awk '{printf "%.0f", 100*($3-$1)/(($4-$2)>0?($4-$2):1)}'
}
echo "idle before: $(idle)%"
echo "== peers"
sh "$bench/tcp-baseline.sh"
sh "$bench/ompi-netpipe.sh" "$work/ompi.out" -u 8388608
echo "== drivers (go test -bench, ${N} iterations)"
go test -run '^$' -bench 'PingPong64|Stream64|StreamMTU' -benchtime "${N}x" ./nic/afpacket ./nic/afxdp | grep -E '^Benchmark|^ok'
echo "idle after: $(idle)%"
