"""A free-running worker on Redlock's nodes, for tests/foreign.rs: SET NX on every node
it is handed (FENCELAB_REDIS_URLS), reports the grant, writes once, and exits."""

import json
import os
import sys
import uuid

import redis

sys.stdin.readline()
nodes = [redis.Redis.from_url(u) for u in os.environ["FENCELAB_REDIS_URLS"].split(",")]
print(json.dumps({"event": "ready"}), flush=True)
sys.stdin.readline()  # start
value, lease = uuid.uuid4().hex, int(os.environ["FENCELAB_LEASE_MS"])
granted = sum(bool(n.set(os.environ["FENCELAB_KEY"], value, nx=True, px=lease)) for n in nodes)
print(f"granted by {granted} of {len(nodes)} nodes", file=sys.stderr, flush=True)
print(json.dumps({"event": "acquired", "value": value}), flush=True)
print(json.dumps({"event": "write", "id": 1, "value": "on a majority"}), flush=True)
sys.stdin.readline()
