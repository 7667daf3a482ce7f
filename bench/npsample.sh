# npsample.sh: sourced by the scripts that sample NetPIPE's 1-byte latency
# and 4 MiB bandwidth in interleaved rounds (cabi.sh, samehost.sh), from the
# repository's root (it changes there). It makes $work, a scratch directory
# removed on exit; run appends "NAME KIND VALUE" to $work/samples and
# median prints the median of one NAME and KIND.

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cd "$root"

lat() { awk 'NR==1{printf "%.2f", $3*1e6}' "$1"; }
bw() { awk '$1==4194304{printf "%.0f", $2}' "$1"; }
run() { # name kind(lat|bw) command...
	name=$1 kind=$2
	shift 2
	rm -f "$work/np.out"
	"$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
	if [ "$kind" = lat ]; then v=$(lat "$work/np.out"); else v=$(bw "$work/np.out"); fi
	echo "$name $kind $v" | tee -a "$work/samples"
}
sizes_lat="-l 1 -u 64"
sizes_bw="-l 4194304 -u 4194304"
median() { # name kind
	awk -v n="$1" -v k="$2" '$1==n && $2==k {print $3}' "$work/samples" | sort -n |
		awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'
}
