#!/usr/bin/env bash
# Record a lesson as a terminal recording (asciicast v2) with nobody at the keyboard:
# the lesson runs in a tmux pane of a fixed size, on the simulator (so every recording
# is the same), and this script presses the keys a learner would.
#
# usage: bash assets/tools/record-lesson.sh [OUT.cast]   (default assets/gc-pause-lesson.cast)
# needs: tmux; play the result with `asciinema play OUT.cast`
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-assets/gc-pause-lesson.cast}
cargo build --release --quiet
bin=$PWD/target/release/fencelab
sock="fencelab-record-$$"
trap 'tmux -L "$sock" kill-server 2>/dev/null || true' EXIT

pane=rec
# shellcheck source=assets/tools/tmux.sh
source assets/tools/tmux.sh

t new-session -d -s rec -x 120 -y 36 "$bin lesson gc-pause --sim --record $out; sleep 30"
wait_for "Enter: continue"       # the introduction waits: read, then go on
sleep 4; t send-keys -t rec Enter
wait_for "The lease drains"      # held while it is read
sleep 3; t send-keys -t rec Enter
wait_for "A's lease expires"     # the lesson holds here: read, then go on
sleep 2; t send-keys -t rec Enter
wait_for "Whose write ends up"   # the question: predict (a wrong guess, to show the feedback)
sleep 2; t send-keys -t rec 2
sleep 3; t send-keys -t rec Enter
wait_for "A wakes up"
sleep 3; t send-keys -t rec Enter
wait_for "What would stop it"
sleep 3; t send-keys -t rec Enter
sleep 8; t send-keys -t rec q
sleep 1
echo "wrote $out"
