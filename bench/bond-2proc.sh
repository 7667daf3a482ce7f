#!/usr/bin/env bash
# 1-byte latency of the VI module (or MODULE=mplite) over K links with the two ends in two processes, in two network
# namespaces joined by K veth pairs (netpipe's two-machine mode: -r on one end, -peer on the
# other), each end pinned to its own CPU (PIN=1) as it would run on a host of its own. Where
# `netpipe -local` runs both ends in one Go process with one P each, here each end has a whole Go
# runtime (its sysmon, helper goroutines) on its one CPU. Configurations run interleaved for
# ROUNDS rounds; prints each one's runs, median and ratio to the plain link (1) and to the bond over
# one link (1b). Needs root and an idle machine.
# Env: MODULE (vi; mplite bonds by itself whenever K > 1 and has no 1b), ROUNDS (7),
# KS ("1 1b 2 3 4": K links, bonded when K > 1; 1b is one bonded link; "1 2 3 4" for mplite,
# where Kn is K links without lanes, everything through the bond: MPLITE_BOND_LANE=0),
# DRIVER (afxdp), PIN (1), OUT (work dir).
set -euo pipefail
cd "$(dirname "$0")/.."
MODULE=${MODULE:-vi}
ROUNDS=${ROUNDS:-7}
if [ "$MODULE" = vi ]; then KS=${KS:-1 1b 2 3 4}; else KS=${KS:-1 2 3 4}; fi
DRIVER=${DRIVER:-afxdp}
PIN=${PIN:-1}
OUT=${OUT:-$(mktemp -d)}
go build -o "$OUT/netpipe" ./cmd/netpipe

A=bpa$$
B=bpb$$
cleanup() {
	set +e
	for ns in $A $B; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
		ip netns del "$ns" 2>/dev/null
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

maxk=1
for k in $KS; do
	n=${k%[bn]}
	[ "$n" -gt "$maxk" ] && maxk=$n
done
ip netns add $A
ip netns add $B
for i in $(seq 0 $((maxk - 1))); do
	ip link add a$i netns $A type veth peer name b$i netns $B
	ip -n $A link set a$i up
	ip -n $B link set b$i up
done
mac() { ip -n "$1" -o link show "$2" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }
pin() { if [ "$PIN" = 1 ]; then echo "taskset -c $1"; fi; }

# Frames are authenticated, as jobs' are: both ends need the same secret.
secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
common=(-module "$MODULE" -driver "$DRIVER" -job 7707 -secret "$secret" -l 1 -u 1 -trials 5 -runtime 100ms -o '' -progress off)
: >"$OUT/samples"
for r in $(seq "$ROUNDS"); do
	for k in $KS; do
		n=${k%[bn]}
		extra=()
		lane=1
		case $k in *b) extra=(-bond) ;; *n) lane=0 ;; esac
		ia=$(seq -s, -f 'a%g' 0 $((n - 1)))
		ib=$(seq -s, -f 'b%g' 0 $((n - 1)))
		peers=$(for i in $(seq 0 $((n - 1))); do mac $B b$i; done | paste -sd,)
		# shellcheck disable=SC2046
		MPLITE_BOND_LANE=$lane ip netns exec $B $(pin 1) "$OUT/netpipe" -r -iface "$ib" "${common[@]}" "${extra[@]}" \
			>/dev/null 2>>"$OUT/err" &
		rp=$!
		sleep 0.3
		# shellcheck disable=SC2046
		MPLITE_BOND_LANE=$lane ip netns exec $A $(pin 0) "$OUT/netpipe" -iface "$ia" -peer "$peers" -json "${common[@]}" "${extra[@]}" \
			>"$OUT/last.json" 2>>"$OUT/err" || true
		wait $rp || true
		# Parsed after netpipe has ended: a parser started beside it takes a CPU from an end.
		lat=$(tail -1 "$OUT/last.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["latency_us"])' 2>/dev/null || echo nan)
		echo "$k $lat" >>"$OUT/samples"
	done
done

python3 - "$OUT/samples" "$KS" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    runs.setdefault(k, []).append(float(v))
med = {k: statistics.median([x for x in v if x == x] or [float("nan")]) for k, v in runs.items()}
print("| links | runs (µs) | median (µs) | x one link | x bond over one link |")
print("|---|---|---|---|---|")
for k in sys.argv[2].split():
    one = med.get("1", float("nan"))
    b1 = med.get("1b", one)
    print(f"| {k} | {' '.join(f'{x:.2f}' for x in runs[k])} | {med[k]:.2f} | {med[k]/one:.2f} | {med[k]/b1:.2f} |")
EOF
