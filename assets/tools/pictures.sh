#!/usr/bin/env bash
# Regenerate the README's timeline pictures: the article's GC pause on the simulator
# (so every run draws the same picture), saved, then drawn with fencing off and on.
#
# usage: bash assets/tools/pictures.sh
# writes: assets/gc-pause-fencing-off.svg, assets/gc-pause-fencing-on.svg,
#         assets/gc-pause-compare.svg (both runs on one time axis)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet
bin=target/release/fencelab
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" run gc-pause --sim --fencing both --save "$work/gc-pause.jsonl" > /dev/null
"$bin" export "$work/gc-pause.jsonl" --run 1 --svg assets/gc-pause-fencing-off.svg
"$bin" export "$work/gc-pause.jsonl" --run 2 --svg assets/gc-pause-fencing-on.svg
"$bin" export "$work/gc-pause.jsonl" --compare --svg assets/gc-pause-compare.svg
