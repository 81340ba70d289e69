"""A free-running worker that says it got the lock without ever asking Redis, then
writes, for tests/foreign.rs: its grant must stay its belief."""

import json
import sys

sys.stdin.readline()
print(json.dumps({"event": "ready"}), flush=True)
sys.stdin.readline()  # start
print(json.dumps({"event": "acquired", "value": "never-stored"}), flush=True)
print(json.dumps({"event": "write", "id": 1, "value": "trust me"}), flush=True)
sys.stdin.readline()
