import json, os, sys, redis
lock = redis.Redis.from_url(os.environ["FENCELAB_REDIS_URL"]).lock(
    os.environ["FENCELAB_KEY"], timeout=int(os.environ["FENCELAB_LEASE_MS"]) / 1000)
say = lambda **event: print(json.dumps(event), flush=True)
sys.stdin.readline(); say(event="ready")  # the hello line, then: ready
for order in map(json.loads, sys.stdin):
    step = order.get("step")
    if step == "acquire": lock.acquire(); say(event="acquired", value=lock.local.token.decode())
    if step == "write": say(event="write", id=1, value=order["value"]); sys.stdin.readline()
    if step == "release": say(event="released" if lock.owned() and not lock.release() else "release_failed")
    if step: say(event="done", step=step)
