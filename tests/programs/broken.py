"""A deliberately broken fencelab worker, for tests/foreign.rs: argv[1] says how.

malformed   ready, then a line that is not a report
silent      ready, then never answers a step
early-exit  ready, then exits with status 3 and a last word on stderr
flood       ready, then far more lines a second than fencelab takes
child       ready, starts a child of its own that sleeps, then goes silent
"""

import json
import subprocess
import sys
import time

how = sys.argv[1]
sys.stdin.readline()
print(json.dumps({"event": "ready"}), flush=True)
if how == "child":
    subprocess.Popen(["sleep", "300"])
sys.stdin.readline()  # the first step
if how == "malformed":
    print('{"event":"aquired","value":"x"}', flush=True)
elif how == "early-exit":
    print("Traceback (most recent call last):", file=sys.stderr)
    print("RuntimeError: the lock library blew up", file=sys.stderr, flush=True)
    sys.exit(3)
elif how == "flood":
    line = json.dumps({"event": "waiting"}) + "\n"
    while True:
        sys.stdout.write(line * 100)
        sys.stdout.flush()
time.sleep(300)
