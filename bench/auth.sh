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
#   bench/auth.sh [ROUNDS]      (default 5; MODULE=mplite, RATE=1gbit,
#                               KINDS="lat bw rate" or a part of it)
set -eu
rounds=${1:-5}
module=${MODULE:-mplite}
rate=${RATE:-1gbit}
kinds=${KINDS:-lat bw rate}
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
has() { case " $kinds " in *" $1 "*) return 0 ;; esac; return 1; }
for r in $(seq "$rounds"); do
	for kind in lat bw; do
		has "$kind" || continue
		eval "sz=\$sizes_$kind"
		suffix=
		pair "$kind" $sz
		run ompi "$kind" sh bench/ompi-netpipe.sh "$work/np.out" $sz
	done
	if has rate; then
		suffix=-rate
		pair bw -rate "$rate" $sizes_bw
	fi
done
echo "== medians of $rounds rounds: 1-byte latency (us), 4 MiB bandwidth (Mbit/s)"
ratio() { # what a b kind goal
	awk -v w="$1" -v a="$(median "$2" "$4")" -v b="$(median "$3" "$4")" -v g="$5" \
		'BEGIN{ if (a != "" && b != "") printf "%s: %s / %s = %.3f (%s)\n", w, a, b, a/b, g }'
}
ratio "latency, on/off" on off lat "goal <= 1.05"
ratio "latency, on/Open MPI" on ompi lat "lower is better"
ratio "bandwidth, unlimited, on/off" on off bw "goal >= 0.95"
ratio "bandwidth, unlimited, on/Open MPI" on ompi bw "higher is better"
ratio "bandwidth at $rate, on/off" on-rate off-rate bw "goal >= 0.95"
