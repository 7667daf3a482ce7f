#!/bin/sh
# tcp-baseline.sh: the kernel TCP peer. NetPIPE over TCP (Debian's
# netpipe-tcp, NPtcp) between two network namespaces joined by one veth pair,
# the link netpipe -local measures.
#
#   bench/tcp-baseline.sh [OUT]
#
# Prints one line:
#   NPtcp MTU=1500 latency_us=X peak_Mbps=Y at Z bytes
# (latency: NetPIPE's smallest message, half a round trip). With OUT, or NPOUT
# in the environment, NetPIPE's np.out (bytes, Mbps, seconds) is copied there.
# Env: MTU (1500), UPPER (largest message, 8388608), NPTCP_FLAGS (more NPtcp
# flags for the transmitter). Needs root, iproute2, netpipe-tcp.
set -eu
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
MTU=${MTU:-1500}
UPPER=${UPPER:-8388608}
out=${1:-${NPOUT:-}}
a=bench-tcp$$a
b=bench-tcp$$b
work=$(mktemp -d)

gone() {
	[ -e "/run/netns/$1" ] || return 0
	for p in $(ip netns pids "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	ip netns del "$1" 2>/dev/null
}
cleanup() {
	set +e
	gone "$a"
	gone "$b"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

i=1
for n in "$a" "$b"; do
	ip netns add "$n"
	ip -n "$n" link set lo up
done
ip link add tcp0 netns "$a" type veth peer name tcp0 netns "$b"
for n in "$a" "$b"; do
	ip -n "$n" link set tcp0 mtu "$MTU" up
	ip -n "$n" addr add 192.0.2.$i/24 dev tcp0
	i=$((i + 1))
done

# The receiver listens on NetPIPE's port 5002; wait until it does.
(cd "$work" && exec ip netns exec "$b" NPtcp >"$work/rx.log" 2>&1) &
rx=$!
tries=0
until ip netns exec "$b" ss -ltn 2>/dev/null | grep -q ':5002 '; do
	tries=$((tries + 1))
	[ "$tries" -lt 100 ] || { cat "$work/rx.log" >&2; echo "tcp-baseline.sh: NPtcp receiver did not start" >&2; exit 1; }
	sleep 0.05
done
# shellcheck disable=SC2086
if ! (cd "$work" && ip netns exec "$a" timeout 300 NPtcp -h 192.0.2.2 -u "$UPPER" -o "$work/np.out" ${NPTCP_FLAGS:-} >"$work/tx.log" 2>&1); then
	cat "$work/tx.log" >&2
	echo "tcp-baseline.sh: NPtcp failed" >&2
	exit 1
fi
wait "$rx" || true
[ -s "$work/np.out" ] || { echo "tcp-baseline.sh: no np.out" >&2; exit 1; }
[ -z "$out" ] || cp "$work/np.out" "$out"
awk -v mtu="$MTU" '
	NR == 1 { lat = $3 * 1e6 }
	$2 > peak { peak = $2; at = $1 }
	END { printf "NPtcp MTU=%d latency_us=%.2f peak_Mbps=%.0f at %d bytes\n", mtu, lat, peak, at }' "$work/np.out"
