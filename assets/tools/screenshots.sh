#!/usr/bin/env bash
# Regenerate the README's screenshots from real runs of the TUI on a private real
# Redis: assets/playground-stale-write.png (A paused, its stale write lands) and
# assets/playground-compare.png (the same pause rerun with fencing on, the two runs
# one above the other).
#
# usage: bash assets/tools/screenshots.sh
# needs: tmux, redis-server, python3 with pillow and fonttools, fonts-dejavu-core
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet
bin=target/release/fencelab
sock="fencelab-shots-$$"
work=$(mktemp -d)
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT

pane=shot
# shellcheck source=assets/tools/tmux.sh
source assets/tools/tmux.sh
shoot() { # capture the pane with colours and render it
  t capture-pane -e -p -t shot > "$work/pane.ans"
  python3 assets/tools/ansi_to_png.py "$work/pane.ans" "$1" --cols 160 --rows 48
  echo "wrote $1"
}

t new-session -d -s shot -x 160 -y 48 "$bin play"
wait_for "LIVE"
sleep 0.6
t send-keys -t shot 1        # pause A mid-lease, as a GC pause would
wait_for "STALE"
shoot assets/playground-stale-write.png
t send-keys -t shot c        # rerun with fencing flipped (on): the pause happens again
wait_for "this run: fencing tokens: on"
wait_for "REJECTED"
shoot assets/playground-compare.png
t send-keys -t shot q
