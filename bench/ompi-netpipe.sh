#!/bin/sh
# ompi-netpipe.sh: the peer for the MPI latency and bandwidth comparisons.
# Open MPI's NetPIPE (Debian netpipe-openmpi, NPopenmpi) over TCP between two
# namespaces (bench/ompi-pair.sh).
#
#   bench/ompi-netpipe.sh OUT [NetPIPE flags...]     e.g. OUT -l 1 -u 64
#
# Writes NetPIPE's np.out (bytes, Mbps, seconds per one-way trip) to OUT and
# prints one line, as bench/tcp-baseline.sh does:
#   NPmpi MTU=1500 latency_us=X peak_Mbps=Y at Z bytes
# Without -u, NetPIPE runs until a transfer takes a second (gigabytes on veth):
# pass -u 8388608 for netpipe's default range.
# Env: MTU (1500). Needs root, iproute2, openmpi-bin, netpipe-openmpi.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 OUT [NetPIPE flags]" >&2; exit 2; }
out=$(realpath "$1")
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM HUP
sh "$(dirname "$0")/ompi-pair.sh" NPopenmpi -o "$dir/np.out" "$@" >"$dir/log" 2>&1 || { cat "$dir/log" >&2; exit 1; }
cp "$dir/np.out" "$out"
awk -v mtu="${MTU:-1500}" '
	NR == 1 { lat = $3 * 1e6 }
	$2 > peak { peak = $2; at = $1 }
	END { printf "NPmpi MTU=%d latency_us=%.2f peak_Mbps=%.0f at %d bytes\n", mtu, lat, peak, at }' "$out"
