"""A report write fenced in Redis with FCALL, from redis-py.

    python3 redis_fcall.py REDIS_URL SCOPE TOKEN BODY

The leasehold_fence library is loaded by RedisFence on its first write (FUNCTION LOAD
REPLACE), or by you from fenceLibrarySource() in leasehold/fencing/redis. The function checks
the token against the scope's mark and, only when it passes, SETs the report and advances the
mark, in one atomic step. Prints "applied", or "stale_fence HWM" (nothing was written).
"""

import sys

import redis

PREFIX = "leasehold:fence:"  # RedisFence's default prefix


def fenced_set(r, scope, token, key, value):
    """FCALL leasehold_fence_set: KEYS mark, idempotency record (the mark: none), claim marker,
    then the write's key; ARGV token, policy, '0' (no idempotency key), its TTL, the value."""
    mark = f"{PREFIX}{{{scope}}}:hwm"
    claimed = f"{PREFIX}{{{scope}}}:claimed"
    reply = r.fcall(
        "leasehold_fence_set", 4, mark, mark, claimed, key, str(token), ">=", "0", 86400000, value
    )
    status = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
    if status == "stale_fence":
        return f"stale_fence {int(reply[1])}"
    return status


def main():
    url, scope, token, body = sys.argv[1:5]
    r = redis.Redis.from_url(url)
    # The report key carries the scope's hash tag, so a Redis Cluster keeps it with the mark.
    print(fenced_set(r, scope, int(token), f"report:{{{scope}}}", body))


if __name__ == "__main__":
    main()
