#!/usr/bin/env bash
# A soak of the playground: the real binary in a tmux pane on its own private Redis,
# driven like a restless learner for a long time (default one hour): pauses, crashes,
# fencing on and off, compare runs, restarts, zoom and moments, resizes. Every
# $SAMPLE seconds it writes fencelab's resident memory (ps RSS, KiB) and CPU time,
# and its redis-server's memory, to a CSV; at the end, a summary: RSS at the start,
# after the first minutes (warm), at the end, the largest, its growth per hour after
# warm-up, and CPU in percent of one core.
#
#   assets/tools/soak.sh [SECONDS] [BINARY]      (SECONDS default 3600)
#   SOAK_CSV=/tmp/soak.csv SAMPLE=30 assets/tools/soak.sh 600
#
# A pass/fail of its own: it exits non-zero when fencelab died, or its memory after
# warm-up grew by more than $MAX_GROWTH_MIB (default 64) over the soak.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-3600}
bin=${2:-target/release/fencelab}
sample=${SAMPLE:-30}
csv=${SOAK_CSV:-$(mktemp -t fencelab-soak-XXXXXX.csv)}
max_growth_mib=${MAX_GROWTH_MIB:-64}
[[ -x $bin ]] || { echo "no binary at $bin (cargo build --release)" >&2; exit 2; }

sock="fencelab-soak-$$"
pane="soak"
source assets/tools/tmux.sh
data=$(mktemp -d)
trap 't kill-server 2>/dev/null || true; rm -rf "$data"' EXIT

t new-session -d -s "$pane" -x 160 -y 48 \
  "env FENCELAB_DATA_DIR=$data $bin; sleep 3600"
wait_for "LIVE"
pid=$(pgrep -P "$(t display -p -t "$pane" '#{pane_pid}')" -f "$bin" | head -1)
[[ -n $pid ]] || { echo "fencelab did not start" >&2; exit 1; }

rss() { ps -o rss= -p "$1" 2>/dev/null | tr -d ' '; }
cpu_s() { # the process's CPU time (user + system), in seconds
  ps -o time= -p "$1" 2>/dev/null | awk -F'[:-]' '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }'
}
redis_pid() { pgrep -P "$pid" redis-server | head -1 || true; }

echo "t_s,fencelab_rss_kib,fencelab_cpu_s,redis_rss_kib" > "$csv"
keys=(1 2 1 x r f c r z Z Right Left space space f r 1 2 r)
sizes=("160 48" "100 30" "80 24" "160 48")
start=$(date +%s)
next_sample=0
i=0
while :; do
  now=$(( $(date +%s) - start ))
  (( now >= seconds )) && break
  kill -0 "$pid" 2>/dev/null || { echo "fencelab died at ${now} s" >&2; tail -3 "$csv" >&2; exit 1; }
  if (( now >= next_sample )); then
    r=$(redis_pid)
    echo "$now,$(rss "$pid"),$(cpu_s "$pid"),${r:+$(rss "$r")}" >> "$csv"
    next_sample=$(( next_sample + sample ))
  fi
  key=${keys[$(( i % ${#keys[@]} ))]}
  t send-keys -t "$pane" "$key"
  # Escape closes whatever a key may have opened (an error panel, the help).
  (( i % 7 == 6 )) && t send-keys -t "$pane" Escape
  if (( i % 150 == 149 )); then
    read -r w h <<< "${sizes[$(( i / 150 % ${#sizes[@]} ))]}"
    t resize-window -t "$pane" -x "$w" -y "$h"
  fi
  i=$(( i + 1 ))
  sleep 1.3
done
echo "$seconds,$(rss "$pid"),$(cpu_s "$pid"),$(rss "$(redis_pid)")" >> "$csv"
t send-keys -t "$pane" q

python3 - "$csv" "$seconds" "$max_growth_mib" "$i" <<'EOF'
import csv, sys
path, seconds, limit, keys = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rows = [r for r in csv.DictReader(open(path)) if r["fencelab_rss_kib"]]
mib = lambda r: int(r["fencelab_rss_kib"]) / 1024
warm_at = min(300.0, seconds / 4)
warm = next(r for r in rows if float(r["t_s"]) >= warm_at)
first, last = rows[0], rows[-1]
span_h = (float(last["t_s"]) - float(warm["t_s"])) / 3600 or float("nan")
growth = mib(last) - mib(warm)
cpu = (float(last["fencelab_cpu_s"]) - float(first["fencelab_cpu_s"])) / max(1.0, float(last["t_s"]) - float(first["t_s"])) * 100
redis = [int(r["redis_rss_kib"]) / 1024 for r in rows if r["redis_rss_kib"]]
print(f"soak: {seconds:.0f} s of the playground on a private Redis, {keys} keys pressed, {len(rows)} samples ({path})")
print(f"  fencelab RSS: start {mib(first):.1f} MiB, warm ({float(warm['t_s']):.0f} s) {mib(warm):.1f} MiB, end {mib(last):.1f} MiB, max {max(map(mib, rows)):.1f} MiB")
print(f"  growth after warm-up: {growth:+.1f} MiB ({growth / span_h:+.1f} MiB/hour)")
print(f"  fencelab CPU: {cpu:.1f} % of one core on average")
if redis:
    print(f"  its redis-server RSS: start {redis[0]:.1f} MiB, end {redis[-1]:.1f} MiB, max {max(redis):.1f} MiB")
sys.exit(1 if growth > limit else 0)
EOF
