"""A program that writes to its Redis as soon as it starts, before reading its hello
(the environment has everything it needs), for tests/foreign.rs: a run staged ahead
must hold that write at its proxy until the run is prepared and the program greeted.
Arguments: a file to write the key to once it is about to send the write; and
`give-up` to wait 0.3 s for the write's answer, then hang up (the write must never
arrive)."""

import json
import os
import sys

import redis

key = os.environ["FENCELAB_KEY"] + ":early"
give_up = sys.argv[2:] == ["give-up"]
# No CLIENT SETINFO nor HELLO as it connects: the first command that waits is the
# write.
client = redis.Redis.from_url(
    os.environ["FENCELAB_REDIS_URL"],
    socket_timeout=0.3 if give_up else 30,
    lib_name=None,
    lib_version=None,
    protocol=2,
)
with open(sys.argv[1], "w") as marker:
    marker.write(key)
try:
    client.set(key, "before the hello", px=60000)
except redis.exceptions.TimeoutError:
    client.close()
sys.stdin.readline()
print(json.dumps({"event": "ready"}), flush=True)
assert json.loads(sys.stdin.readline())["type"] == "start"
if not give_up:
    client.delete(key)
