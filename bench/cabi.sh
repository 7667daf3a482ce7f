#!/bin/sh
# cabi.sh: the C ABI against the Go API and Open MPI, interleaved. Each
# round runs, on the same kind of link (two namespaces, one veth pair, MTU
# 1500), NetPIPE's 1-byte latency and its 4 MiB bandwidth for:
#   c       Debian's unmodified NPmpich2 over our libmpich.so.12, under mprun -np 2
#   go      netpipe -local -module mplite (the Go API)
# both on the frame driver DRIVER (default afxdp, what mprun's -driver auto
# takes for two ranks; DRIVER=afpacket for the other),
#   ompi    Open MPI's NPopenmpi over TCP (bench/ompi-netpipe.sh)
# and prints every sample, then the medians and the ratios the C ABI is held
# to. Needs root, an idle machine, Go, and Debian's netpipe-mpich2,
# openmpi-bin and netpipe-openmpi.
#
#   bench/cabi.sh [ROUNDS]          (default 5)
set -eu
rounds=${1:-5}
driver=${DRIVER:-afxdp}
. "$(dirname "$0")/npsample.sh"
go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libmpich.so.12 -o "$work/lib/libmpich.so.12" ./cmd/libmpich
go build -o "$work/" ./cmd/mprun ./cmd/netpipe
for r in $(seq "$rounds"); do
	for kind in lat bw; do
		eval "sz=\$sizes_$kind"
		run c "$kind" env LD_LIBRARY_PATH="$work/lib" "$work/mprun" -np 2 -driver "$driver" -- NPmpich2 $sz -o "$work/np.out"
		run go "$kind" "$work/netpipe" -local -module mplite -driver "$driver" -full $sz -o "$work/np.out" -progress off
		run ompi "$kind" sh bench/ompi-netpipe.sh "$work/np.out" $sz
	done
done
echo "== driver $driver, medians of $rounds rounds: 1-byte latency (us), 4 MiB bandwidth (Mbit/s)"
for kind in lat bw; do
	for name in c go ompi; do
		v=$(median $name $kind)
		eval "${name}_$kind=$v"
		echo "$name $kind $v"
	done
done
awk -v c="$c_lat" -v g="$go_lat" -v o="$ompi_lat" -v cb="$c_bw" -v gb="$go_bw" 'BEGIN{
	printf "latency: C/Go %.2f (goal <= 1.2), C/Open MPI %.2f (goal <= 0.8)\n", c/g, c/o
	printf "bandwidth: C/Go %.2f (goal >= 0.9)\n", cb/gb }'
