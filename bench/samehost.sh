#!/bin/sh
# samehost.sh: two ranks of one host, against Open MPI's shared memory. Each
# round runs NetPIPE's 1-byte latency and its 4 MiB bandwidth for:
#   ours    netpipe -local -same-host -procs -module mplite: both ends in one
#           namespace, sharing its NIC as endpoints 0 and 1 (AF_PACKET, shared
#           mode), each a process of its own bound to a CPU, as vader's are
#   vader   Open MPI's NPopenmpi, two ranks in this namespace over its
#           shared-memory BTL (vader)
# and prints every sample, then the medians and the ratios. Needs root, an
# idle machine, Go, openmpi-bin and netpipe-openmpi.
#
#   bench/samehost.sh [ROUNDS]          (default 5)
set -eu
rounds=${1:-5}
. "$(dirname "$0")/npsample.sh"
go build -o "$work/" ./cmd/netpipe
for r in $(seq "$rounds"); do
	for kind in lat bw; do
		eval "sz=\$sizes_$kind"
		run ours "$kind" "$work/netpipe" -local -same-host -procs -module mplite -full $sz -o "$work/np.out" -progress off
		run vader "$kind" mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --mca pml ob1 --mca btl vader,self \
			NPopenmpi $sz -o "$work/np.out"
	done
done
for kind in lat bw; do
	for name in ours vader; do
		v=$(median $name $kind)
		eval "${name}_$kind=$v"
		echo "median $name $kind $v"
	done
done
awk -v ol="$ours_lat" -v vl="$vader_lat" -v ob="$ours_bw" -v vb="$vader_bw" 'BEGIN{
	printf "ratio lat ours/vader %.2f\n", ol/vl
	printf "ratio bw ours/vader %.2f\n", ob/vb }'
