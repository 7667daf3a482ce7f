#!/bin/sh
# auth.sh: what frame authentication costs, interleaved. Each round runs,
# on one veth pair (two namespaces, MTU 1500, the ends pinned), NetPIPE's
# 1-byte latency and its 4 MiB bandwidth for:
#   on      netpipe -local -module MODULE (frames authenticated, the default)
#   off     the same with -auth=false
#   ompi    Open MPI's NPopenmpi over TCP (bench/ompi-netpipe.sh), the peer
# then the 4 MiB bandwidth of on and off at RATE (default 1gbit), where the
# line, not the two CPUs, is the limit. Prints every sample, the medians
# and the ratios (goal: on/off at most 1.05 for latency, at least 0.95 for
# bandwidth). Needs root, an idle machine, Go, openmpi-bin and
# netpipe-openmpi.
#
#   bench/auth.sh [ROUNDS]      (default 5; MODULE=mplite, RATE=1gbit)
set -eu
rounds=${1:-5}
module=${MODULE:-mplite}
rate=${RATE:-1gbit}
. "$(dirname "$0")/npsample.sh"
go build -o "$work/" ./cmd/netpipe
# The kernel tears a run's namespaces down after the run ends; the pause
# keeps that work out of the next run, and the order of on and off
# alternates between rounds so that neither always comes first.
np() { sleep 2; "$work/netpipe" -local -module "$module" -full -progress off -o "$work/np.out" "$@"; }
pair() { # kind sizes...: on and off, in this round's order
	kind=$1
	shift
	if [ $((r % 2)) = 1 ]; then
		run "on$suffix" "$kind" np "$@"
		run "off$suffix" "$kind" np -auth=false "$@"
	else
		run "off$suffix" "$kind" np -auth=false "$@"
		run "on$suffix" "$kind" np "$@"
	fi
}
for r in $(seq "$rounds"); do
	for kind in lat bw; do
		eval "sz=\$sizes_$kind"
		suffix=
		pair "$kind" $sz
		run ompi "$kind" sh bench/ompi-netpipe.sh "$work/np.out" $sz
	done
	suffix=-rate
	pair bw -rate "$rate" $sizes_bw
done
echo "== medians of $rounds rounds: 1-byte latency (us), 4 MiB bandwidth (Mbit/s)"
for s in "on lat" "off lat" "ompi lat" "on bw" "off bw" "ompi bw" "on-rate bw" "off-rate bw"; do
	set -- $s
	v=$(median "$1" "$2")
	echo "$1 $2 $v"
	eval "$(echo "$1" | tr - _)_$2=$v"
done
awk -v a="$on_lat" -v b="$off_lat" -v o="$ompi_lat" -v c="$on_bw" -v d="$off_bw" -v p="$ompi_bw" -v e="$on_rate_bw" -v f="$off_rate_bw" 'BEGIN{
	printf "latency: on/off %.3f (goal <= 1.05); on/Open MPI %.2f, off/Open MPI %.2f\n", a/b, a/o, b/o
	printf "bandwidth, unlimited: on/off %.3f (goal >= 0.95); on/Open MPI %.2f\n", c/d, c/p
	printf "bandwidth at the line rate: on/off %.3f (goal >= 0.95)\n", e/f }'
