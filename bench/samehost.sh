#!/bin/sh
# samehost.sh: two ranks of one host, against Open MPI's shared memory. Each
# round runs NetPIPE's 1-byte latency and its 4 MiB bandwidth for:
#   ours    netpipe -local -same-host -procs -module mplite: both ends in one
#           namespace, sharing its NIC as endpoints 0 and 1 (AF_PACKET, shared
#           mode), each a process of its own bound to a CPU, as vader's are
#   c       Debian's unmodified NPmpich2 over our libmpich.so.12, two ranks
#           of one host under mprun -np 2 -ppn 2 (the same shared memory,
#           each MPI call crossing from C into Go)
#   vader   Open MPI's NPopenmpi, two ranks in this namespace over its
#           shared-memory BTL (vader)
# and prints every sample, then the medians and the ratios. Needs root, an
# idle machine, Go, openmpi-bin, netpipe-openmpi and netpipe-mpich2.
#
#   bench/samehost.sh [ROUNDS]          (default 5)
set -eu
rounds=${1:-5}
. "$(dirname "$0")/npsample.sh"
go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libmpich.so.12 -o "$work/lib/libmpich.so.12" ./cmd/libmpich
go build -o "$work/" ./cmd/netpipe ./cmd/mprun
for r in $(seq "$rounds"); do
	for kind in lat bw; do
		eval "sz=\$sizes_$kind"
		run ours "$kind" "$work/netpipe" -local -same-host -procs -module mplite -full $sz -o "$work/np.out" -progress off
		run c "$kind" env LD_LIBRARY_PATH="$work/lib" "$work/mprun" -np 2 -ppn 2 -- NPmpich2 $sz -o "$work/np.out"
		run vader "$kind" mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --mca pml ob1 --mca btl vader,self \
			NPopenmpi $sz -o "$work/np.out"
	done
done
for kind in lat bw; do
	for name in ours c vader; do
		v=$(median $name $kind)
		eval "${name}_$kind=$v"
		echo "median $name $kind $v"
	done
done
awk -v ol="$ours_lat" -v vl="$vader_lat" -v ob="$ours_bw" -v vb="$vader_bw" -v cl="$c_lat" -v cb="$c_bw" 'BEGIN{
	printf "ratio lat ours/vader %.2f, c/vader %.2f, c/ours %.2f\n", ol/vl, cl/vl, cl/ol
	printf "ratio bw ours/vader %.2f, c/vader %.2f, c/ours %.2f\n", ob/vb, cb/vb, cb/ob }'
