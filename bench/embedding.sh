#!/bin/sh
# embedding.sh: latency and bandwidth of one MPICH-linked ping-pong binary,
# run unmodified on real MPICH (TCP) and on Ethervia's libmpich.so.12, over
# the same link: two network namespaces joined by one veth pair, or with
# -rate by a rate-limited switch. Needs root, Debian's mpich and libmpich-dev, Go.
#
#   [DRIVER=auto|afpacket|afxdp] [TBF_BURST=32kb] bench/embedding.sh [-rate 1gbit] [-mtu 1500] [-reps N] [-rounds N]
#
# Prints each run (bytes, one-way latency in us, bandwidth in MB/s), the two
# libraries interleaved over -rounds rounds, then the medians side by side.
# Run it on an idle machine: numbers from a loaded one mean nothing. If
# NPmpich2 (apt-get install netpipe-mpich2) is installed it is run the same
# way too (np.mpich.out, np.ethervia.out).
set -eu
rate= mtu=1500 reps=0 rounds=1
while [ $# -gt 0 ]; do
	case $1 in
	-rate) rate=$2; shift 2 ;;
	-mtu) mtu=$2; shift 2 ;;
	-reps) reps=$2; shift 2 ;;
	-rounds) rounds=$2; shift 2 ;;
	*) echo "usage: $0 [-rate RATE] [-mtu MTU] [-reps N] [-rounds N]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "$0: needs root (network namespaces)" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/embedding.XXXXXX)
na=evb$$a nb=evb$$b nsw=evb$$s
cleanup() {
	ip netns del "$na" 2>/dev/null || true
	ip netns del "$nb" 2>/dev/null || true
	ip netns del "$nsw" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# The library and the program (compiled with MPICH's own mpicc and headers).
(cd "$root" && go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libmpich.so.12 \
	-o "$work/lib/libmpich.so.12" ./cmd/libmpich)
cat >"$work/pingpong.c" <<'CEOF'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
	int rank, fixed = argc > 1 ? atoi(argv[1]) : 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	char *buf = malloc(1 << 22);
	for (int n = 1; n <= 1 << 22; n *= 4) {
		int reps = fixed > 0 ? fixed : n < 65536 ? 2000 : n < (1 << 20) ? 200 : 50;
		double best = 1e9;
		for (int trial = 0; trial < 3; trial++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (int i = 0; i < reps; i++) {
				if (rank == 0) {
					MPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
					MPI_Recv(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				} else {
					MPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
					MPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
				}
			}
			double t = (MPI_Wtime() - t0) / reps / 2;
			if (t < best) best = t;
		}
		if (rank == 0) printf("%9d %10.2f %10.2f\n", n, best * 1e6, n / best / 1e6);
		fflush(stdout);
	}
	MPI_Finalize();
	return 0;
}
CEOF
mpicc.mpich -O2 -o "$work/pingpong" "$work/pingpong.c"

# The link: one veth pair, named ev0 on both sides. With -rate, a switch
# instead: a bridge in a third namespace, with a tbf on each switch port's
# egress. (A tbf on the hosts' own ev0 would not do: our AF_PACKET sockets
# bypass the sender's qdisc, as NIC-level transports do, so only a limit
# past the host, as on a real switch port, applies to both libraries.)
# The bucket is small (TBF_BURST, default 32kb): a ping-pong's bucket fills
# again while the reply travels, so with a bucket larger than a message
# every message would pass at the veth's speed, and a bucket larger than
# TCP's 64 KiB GSO segments lets a segment through as one packet. 32 KiB
# still carries TCP at 99 % of its frames' payload share at 1 Gbit/s.
ip netns add "$na"
ip netns add "$nb"
if [ -n "$rate" ]; then
	ip netns add "$nsw"
	ip -n "$nsw" link add br0 type bridge
	ip -n "$nsw" link set br0 up
	for ns in "$na" "$nb"; do
		ip link add "$ns" netns "$ns" type veth peer name "p$ns" netns "$nsw"
		ip -n "$nsw" link set "p$ns" mtu "$mtu" master br0 up
		ip netns exec "$nsw" tc qdisc add dev "p$ns" root tbf rate "$rate" burst "${TBF_BURST:-32kb}" latency 50ms
	done
else
	ip link add "$na" netns "$na" type veth peer name "$nb" netns "$nb"
fi
i=1
for ns in "$na" "$nb"; do
	ip -n "$ns" link set "$ns" name ev0
	ip -n "$ns" link set ev0 mtu "$mtu" up
	ip -n "$ns" link set lo up
	ip -n "$ns" addr add "10.77.0.$i/24" dev ev0
	i=$((i + 1))
done

# Hydra's ssh launcher, replaced: run each proxy in its host's namespace.
cat >"$work/launch" <<LEOF
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1; shift
case \$host in 10.77.0.1) ns=$na ;; *) ns=$nb ;; esac
exec ip netns exec \$ns sh -c "\$*"
LEOF
chmod +x "$work/launch"
hydra() {
	ip netns exec "$na" mpiexec.mpich -launcher ssh -launcher-exec "$work/launch" -iface ev0 \
		-hosts 10.77.0.1,10.77.0.2 -n 2 "$@"
}
prog=$work/pingpong
[ "$reps" -gt 0 ] && prog="$prog $reps"

# The namespaces share the hostname and /dev/shm, so MPICH (ch4:ucx) would
# take them for one node and use shared memory: force its network path, and
# UCX's TCP transport on ev0. Our ranks get GOMAXPROCS=1: Hydra sees two
# hosts, but the two share this machine's CPUs (mprun sets it the same way).
mpich() {
	hydra -genv LD_LIBRARY_PATH= -genv MPIR_CVAR_NOLOCAL 1 -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES ev0 "$@"
}
ethervia() {
	hydra -genv LD_LIBRARY_PATH "$work/lib" -genv MPLITE_IFACES ev0 -genv MPLITE_JOB 0x$$ -genv GOMAXPROCS 1 \
		-genv MPLITE_DRIVER "${DRIVER:-auto}" "$@"
}
for r in $(seq "$rounds"); do
	echo "== round $r: MPICH (TCP over ev0), then Ethervia libmpich.so.12 (raw Ethernet over ev0)"
	mpich $prog | tee -a "$work/mpich.txt"
	ethervia $prog | tee -a "$work/ethervia.txt"
done

# median per size (latency; bandwidth follows from it) over the rounds
median() {
	sort -n -k1,1 -k2,2 "$1" | awk '{n[$1]++; v[$1, n[$1]] = $2; if (!($1 in seen)) { seen[$1]; order[++k] = $1 } }
		END { for (i = 1; i <= k; i++) { s = order[i]; m = v[s, int((n[s] + 1) / 2)]; printf "%d %.2f %.2f\n", s, m, s / m } }'
}
median "$work/mpich.txt" >"$work/mpich.med"
median "$work/ethervia.txt" >"$work/ethervia.med"
echo "== medians of $rounds rounds: bytes | MPICH us, MB/s | Ethervia us, MB/s | Ethervia/MPICH time"
paste "$work/mpich.med" "$work/ethervia.med" |
	awk '{printf "%9d | %10s %10s | %10s %10s | %5.2f\n", $1, $2, $3, $5, $6, $5 / $2}'

if command -v NPmpich2 >/dev/null; then
	mpich NPmpich2 -o np.mpich.out >/dev/null 2>&1 && echo "NPmpich2 over MPICH: np.mpich.out"
	ethervia NPmpich2 -o np.ethervia.out >/dev/null 2>&1 && echo "NPmpich2 over Ethervia: np.ethervia.out"
fi
