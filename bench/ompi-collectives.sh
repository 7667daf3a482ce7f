#!/bin/sh
# ompi-collectives.sh: the Open MPI peer for bench/coll.sh. NP Open MPI ranks,
# each in a network namespace of its own with one veth into a bridge that sits
# in a further namespace (the switch), as mprun builds for our ranks. TCP only
# (PML ob1, BTLs tcp and self: no shared memory, no UCX), so every MPI byte
# crosses the bridge. ompi_coll.c (beside this script) times the collectives.
#
#   bench/ompi-collectives.sh
#
# Prints one line per collective and size, in cmd/collbench's format:
#   coll=NAME algo=tuned bytes=N ranks=P us=T
# (T: mean time per call over a timed loop, the slowest rank's), then
#   startup ranks=P us=T
# (T: from mpirun's start, the namespaces already made, to the end of
# MPI_Init on every rank).
#
# Env: NP (8 ranks), PPN (1: ranks per namespace; with more, each namespace
# is a node of its own to Open MPI, launched through an rsh agent, and the
# ranks of a namespace also use its shared memory, BTL vader, as a cluster
# node's would), MTU (1500), SECS (timed seconds per point, 2),
# SIZES (1,1024,65536,1048576), COLLS (bcast,allgather,alltoall,allreduce),
# RATE (none; tc style such as 100mbit or 1gbit): a tbf on every switch port
# towards its host, sized as the testbed sizes it for mprun -rate (bucket 5 ms
# of the rate but at least two frames, queue the bucket plus 50 ms);
# DUPLEX=1 shapes what each host sends into its port the same way (mprun
# -duplex), as a full-duplex link of that rate.
# SYNC=1 times every call alone after an untimed barrier (collbench -sync).
# LIMIT (600): seconds mpirun may run before it is killed (the script then
# fails). With more ranks than CPUs, Open MPI's ranks yield when idle, as ours do.
# Needs root, iproute2, openmpi-bin and libopenmpi-dev (mpicc).
set -eu
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
NP=${NP:-8}
PPN=${PPN:-1}
HOSTS=$(((NP + PPN - 1) / PPN))
MTU=${MTU:-1500}
SECS=${SECS:-2}
SIZES=${SIZES:-1,1024,65536,1048576}
COLLS=${COLLS:-bcast,allgather,alltoall,allreduce}
RATE=${RATE:-}
DUPLEX=${DUPLEX:-0}
SYNC=${SYNC:-0}
here=$(cd "$(dirname "$0")" && pwd)
ns=bench-coll$$-
sw=${ns}sw
work=$(mktemp -d)

# gone NS: kill what runs in namespace NS and remove it, if it exists.
gone() {
	[ -e "/run/netns/$1" ] || return 0
	for p in $(ip netns pids "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	ip netns del "$1" 2>/dev/null
}
cleanup() {
	set +e
	i=0
	while [ "$i" -lt "$HOSTS" ]; do
		gone "$ns$i"
		i=$((i + 1))
	done
	gone "$sw"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# rate_bytes RATE: a tc-style rate in bytes per second (bit, kbit, mbit, gbit,
# tbit in powers of 1000, or a bare number of bit/s).
rate_bytes() {
	echo "$1" | awk '{
		v = $0 + 0; u = tolower($0); sub(/^[0-9.eE+-]+/, "", u)
		m = u == "" || u == "bit" ? 1 : u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : u == "tbit" ? 1e12 : -1
		if (m < 0 || v <= 0) exit 1
		printf "%.0f\n", v * m / 8 }'
}

command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null || {
	echo "ompi-collectives.sh: Open MPI is not installed: apt-get install -y openmpi-bin libopenmpi-dev" >&2
	exit 1
}
mpicc.openmpi -O2 -o "$work/ompi_coll" "$here/ompi_coll.c"

newns() {
	ip netns add "$1"
	ip -n "$1" link set lo up
}
newns "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 mtu "$MTU" up
if [ -n "$RATE" ]; then
	rate=$(rate_bytes "$RATE") || { echo "ompi-collectives.sh: bad RATE $RATE" >&2; exit 2; }
	frame=$((MTU + 18))
	burst=$((rate / 200))
	[ "$burst" -ge $((2 * frame)) ] || burst=$((2 * frame))
	limit=$((burst + rate / 20))
fi
apps=""
i=0
while [ "$i" -lt "$HOSTS" ]; do
	h=$ns$i
	newns "$h"
	ip link add mpi0 netns "$h" type veth peer name port$i netns "$sw"
	ip -n "$h" link set mpi0 mtu "$MTU" up
	ip -n "$h" addr add 192.0.2.$((i + 1))/24 dev mpi0
	ip -n "$sw" link set port$i mtu "$MTU" master br0 up
	if [ -n "$RATE" ]; then
		ip netns exec "$sw" tc qdisc add dev port$i root tbf rate "${rate}bps" burst "$burst" limit "$limit"
		if [ "$DUPLEX" = 1 ]; then
			# What the host sends, shaped the same way before the bridge
			# (an ifb behind the port's ingress), as mprun -duplex does.
			ip -n "$sw" link add name q$i type ifb
			ip -n "$sw" link set dev q$i up
			ip netns exec "$sw" tc qdisc add dev q$i root tbf rate "${rate}bps" burst "$burst" limit "$limit"
			ip netns exec "$sw" tc qdisc add dev port$i handle ffff: ingress
			ip netns exec "$sw" tc filter add dev port$i parent ffff: protocol all u32 match u32 0 0 \
				action mirred egress redirect dev q$i
		fi
	fi
	prog="$work/ompi_coll $SECS $SIZES $COLLS"
	[ "$SYNC" = 1 ] && prog="$prog sync"
	n=$PPN
	[ $(((i + 1) * PPN)) -le "$NP" ] || n=$((NP - i * PPN))
	if [ "$i" -eq 0 ]; then
		apps="-np $n $prog"
	else
		apps="$apps : -np $n ip netns exec $h $prog"
	fi
	echo "h$i slots=$n" >>"$work/hosts"
	i=$((i + 1))
done
if [ "$PPN" -gt 1 ]; then
	# Several ranks per namespace: each namespace must be a node of its own
	# to Open MPI, or it takes every rank for one host's and moves every
	# byte through its shared memory, none over the switch. A launch agent
	# (plm_rsh_agent, what ssh is between real nodes) starts one daemon
	# per namespace, each under a host name of its own (a UTS namespace:
	# vader names its segments after the host).
	cat >"$work/agent.sh" <<AGENT
#!/bin/sh
h=\$1
shift
exec ip netns exec "$ns\${h#h}" unshare --uts sh -c "echo \$h >/proc/sys/kernel/hostname; \$*"
AGENT
	chmod +x "$work/agent.sh"
	apps="--hostfile $work/hosts --mca plm_rsh_agent $work/agent.sh -np $NP $prog"
fi

# Bytes the switch delivered to the ranks, to prove the data crossed it.
delivered() {
	ip netns exec "$sw" cat /proc/net/dev | awk '$1 ~ /^port[0-9]+:/ {s += $10} END {printf "%.0f\n", s}'
}
before=$(delivered)

yield=0
[ "$NP" -le "$(nproc)" ] || yield=1
btl=tcp,self
[ "$PPN" -le 1 ] || btl=tcp,self,vader
cd "$work"
launch=$(date +%s.%N)
# Rank 0 runs in the first namespace with mpirun, whose PMIx server must
# listen on the veth for the ranks in the other namespaces to reach it.
# shellcheck disable=SC2086
if ! ip netns exec "${ns}0" timeout "${LIMIT:-600}" env PMIX_MCA_ptl_tcp_if_include=mpi0 \
	mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none \
	--mca mpi_yield_when_idle $yield \
	--mca pml ob1 --mca btl "$btl" --mca btl_tcp_if_include mpi0 --mca oob_tcp_if_include mpi0 \
	$apps >"$work/out" 2>"$work/err"; then
	cat "$work/err" >&2
	echo "ompi-collectives.sh: mpirun failed" >&2
	exit 1
fi

# Every point moves at least (HOSTS-1) times its size through the switch.
max=$(echo "$SIZES" | tr ',' '\n' | sort -n | tail -1)
need=$(((HOSTS - 1) * max))
got=$(($(delivered) - before))
echo "ompi-collectives.sh: the switch delivered $got bytes (at least $need needed)" >&2
[ "$got" -ge "$need" ] || { echo "ompi-collectives.sh: the MPI data did not cross the switch" >&2; exit 1; }
grep '^coll=' "$work/out"
# Start-up: from mpirun's start to the end of MPI_Init on every rank.
sed -n 's/^init_unix=//p' "$work/out" | awk -v l="$launch" -v np="$NP" '{printf "startup ranks=%d us=%.0f\n", np, ($1 - l) * 1e6}'

