"""A program that writes to its Redis as soon as it starts, before reading its hello
(the environment has everything it needs), for tests/foreign.rs: a run staged ahead
must hold that write at its proxy until the run is prepared and the program greeted.
Argument: a file to write the key to once it is about to send the write."""

import json
import os
import sys

import redis

key = os.environ["FENCELAB_KEY"] + ":early"
client = redis.Redis.from_url(os.environ["FENCELAB_REDIS_URL"], socket_timeout=30)
with open(sys.argv[1], "w") as marker:
    marker.write(key)
client.set(key, "before the hello", px=60000)
sys.stdin.readline()
print(json.dumps({"event": "ready"}), flush=True)
assert json.loads(sys.stdin.readline())["type"] == "start"
client.delete(key)
