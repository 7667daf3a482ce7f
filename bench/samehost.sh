#!/bin/sh
# samehost.sh: two ranks of one host, against Open MPI's shared memory. Each
# round runs NetPIPE's 1-byte latency and its 4 MiB bandwidth for:
#   ours    netpipe -local -same-host -module mplite: both ends in one namespace,
#           sharing its NIC as endpoints 0 and 1 (AF_PACKET, shared mode)
#   vader   Open MPI's NPopenmpi, two ranks in this namespace over its
#           shared-memory BTL (vader)
# and prints every sample, then the medians and the ratios. Needs root, an
# idle machine, Go, openmpi-bin and netpipe-openmpi.
#
#   bench/samehost.sh [ROUNDS]          (default 5)
set -eu
rounds=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/samehost.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
cd "$root"
go build -o "$work/" ./cmd/netpipe

. "$root/bench/npsample.sh"
for r in $(seq "$rounds"); do
	for kind in lat bw; do
		eval "sz=\$sizes_$kind"
		run ours "$kind" "$work/netpipe" -local -same-host -module mplite -full $sz -o "$work/np.out" -progress off
		run vader "$kind" mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --mca pml ob1 --mca btl vader,self \
			NPopenmpi $sz -o "$work/np.out"
	done
done
awk '{ v[$1" "$2] = v[$1" "$2] " " $3 }
	END { for (k in v) print k v[k] }' "$work/samples" | while read -r name kind vals; do
	med=$(echo "$vals" | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
	echo "median $name $kind $med"
done | sort | tee "$work/medians"
awk '$1=="median"{m[$2" "$3]=$4} END{
	printf "ratio lat ours/vader %.2f\n", m["ours lat"]/m["vader lat"]
	printf "ratio bw ours/vader %.2f\n", m["ours bw"]/m["vader bw"] }' "$work/medians"
