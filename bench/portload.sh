#!/usr/bin/env bash
# How busy the switch ports and the CPUs are while a collective runs: tells a point that runs at
# its frames' wire time (every port near 100 % of its line) from one that waits for the CPUs
# (ports idle while the CPUs are busy). Runs collbench under mprun on the usual testbed and, in
# the middle of the run, samples for WINDOW seconds: the bytes and frames each switch port sent
# toward its host (/proc/net/dev in the switch's namespace; tbf on that port counts the same
# bytes) and the machine's CPU time by kind (/proc/stat). Prints one line per port and a summary:
#   port load   bytes a second over the port's line rate (RATE), min / median / max over ports
#   frame bytes bytes per frame, median over ports
#   cpu         share of the CPUs' time busy, and the share in softirq (the kernel's switch: veth,
#               bridge, tbf) and in user and system time (the ranks)
# Needs root and an idle machine.
# Env: NP (8), RATE (100mbit; tc style: Kbit, mbit, gbit), COLL (allreduce), SIZE (65536),
# ALGO (auto), SECS (collbench's timed seconds; 8), WINDOW (2), NICS (1), MPRUN_ARGS (more mprun
# flags, such as "-driver afpacket").
# Example: NP=16 COLL=alltoall SIZE=1048576 bench/portload.sh
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
cd "$bench/.."
NP=${NP:-8}
RATE=${RATE:-100mbit}
COLL=${COLL:-allreduce}
SIZE=${SIZE:-65536}
ALGO=${ALGO:-auto}
SECS=${SECS:-8}
WINDOW=${WINDOW:-2}
NICS=${NICS:-1}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

bps=$(awk -v r="$RATE" 'BEGIN {
	v = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u)
	m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : (u == "bit" || u == "") ? 1 : -1
	if (m < 0) { print "bad RATE " r > "/dev/stderr"; exit 1 }
	printf "%.0f\n", v * m }')

go build -o "$OUT/mprun" ./cmd/mprun
go build -o "$OUT/collbench" ./cmd/collbench

# shellcheck disable=SC2086
"$OUT/mprun" -np "$NP" -nics "$NICS" -rate "$RATE" ${MPRUN_ARGS:-} -- \
	"$OUT/collbench" -colls "$COLL" -sizes "$SIZE" -algos "$ALGO" -secs "$SECS" >"$OUT/run.out" 2>"$OUT/run.err" &
run=$!

# The switch's namespace is named after mprun's pid: ev, the run label of ETHERVIA_RUN if any
# (testbed.Prefix), -mprun-PID-..., -sw0. Wait for it.
sw=
for _ in $(seq 200); do
	sw=$(ip netns list | awk -v p="-mprun-$run-" 'index($1, p) > 0 && $1 ~ /^ev[a-z0-9]*-/ && $1 ~ /-sw0$/ {print $1; exit}')
	[ -n "$sw" ] && break
	sleep 0.05
done
[ -n "$sw" ] || { wait "$run" || true; cat "$OUT/run.err" >&2; echo "portload.sh: no switch namespace for mprun $run" >&2; exit 1; }

# Sample in the middle of the timed part: start-up and warm-up take about two seconds.
sleep "$(awk -v s="$SECS" -v w="$WINDOW" 'BEGIN { d = 2 + (s - w) / 2; print (d > 0 ? d : 0) }')"
snap() {
	head -1 /proc/stat >"$OUT/cpu.$1"
	ip netns exec "$sw" cat /proc/net/dev |
		awk 'NR > 2 { sub(/:$/, "", $1); if ($1 != "lo" && $1 !~ /^br/) print $1, $10, $11 }' | sort >"$OUT/dev.$1"
}
snap a
sleep "$WINDOW"
snap b
wait "$run" || { cat "$OUT/run.err" >&2; echo "portload.sh: mprun failed" >&2; exit 1; }

join "$OUT/dev.a" "$OUT/dev.b" | awk -v w="$WINDOW" -v bps="$bps" '
	{ db = $4 - $2; df = $5 - $3; if (df <= 0) next
	  load = db * 8 / w / bps; n++; L[n] = load; F[n] = db / df
	  printf "port %-5s load %.3f  frames/s %7.0f  bytes/frame %5.0f\n", $1, load, df / w, db / df }
	function med(a, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	  return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
	END { if (!n) { print "portload.sh: no port carried frames" > "/dev/stderr"; exit 1 }
	  mn = mx = L[1]; for (i = 1; i <= n; i++) { if (L[i] < mn) mn = L[i]; if (L[i] > mx) mx = L[i] }
	  m = med(L, n); f = med(F, n)
	  printf "port load min %.3f median %.3f max %.3f; frame bytes median %.0f\n", mn, m, mx, f }'
paste "$OUT/cpu.a" "$OUT/cpu.b" | awk '{
	# /proc/stat: user nice system idle iowait irq softirq steal ...
	n = NF / 2; for (i = 2; i <= n; i++) { d[i] = $(i + n) - $i; t += d[i] }
	printf "cpu busy %.3f: user %.3f system %.3f softirq %.3f\n", 1 - (d[5] + d[6]) / t, (d[2] + d[3]) / t, d[4] / t, d[8] / t }'
grep -h 'coll=' "$OUT/run.out" || { cat "$OUT/run.err" >&2; echo "portload.sh: collbench printed no result" >&2; exit 1; }
