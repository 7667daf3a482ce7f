#!/bin/sh
# ompi-pair.sh: run an Open MPI program as two ranks in two network
# namespaces joined by one veth pair, TCP only (PML ob1, BTLs tcp and self:
# no shared memory, no UCX), so every MPI byte crosses the veth as ours
# do. The program runs in a scratch directory; its output passes through.
#
#   bench/ompi-pair.sh PROGRAM [ARGS...]
#
# Env: MTU (1500). Needs root, iproute2, openmpi-bin.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 PROGRAM [ARGS]" >&2; exit 2; }
a=bench-ompi$$a b=bench-ompi$$b
dir=$(mktemp -d)
cleanup() {
	for ns in $a $b; do
		[ -e "/run/netns/$ns" ] || continue
		for p in $(ip netns pids $ns 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		ip netns del $ns 2>/dev/null || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
i=1
for ns in $a $b; do
	ip netns add $ns
	ip -n $ns link set lo up
done
ip link add mpi0 netns $a type veth peer name mpi0 netns $b
for ns in $a $b; do
	ip -n $ns link set mpi0 mtu "${MTU:-1500}" up
	ip -n $ns addr add 192.0.2.$i/24 dev mpi0
	i=$((i + 1))
done
# mpirun serves PMIx to rank 1 in the other namespace: make it listen on
# the veth, not on loopback.
cd "$dir"
ip netns exec $a timeout 300 env PMIX_MCA_ptl_tcp_if_include=mpi0 \
	mpirun.openmpi --allow-run-as-root --bind-to none \
	--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include mpi0 --mca oob_tcp_if_include mpi0 \
	-np 1 "$@" : -np 1 ip netns exec $b "$@"
