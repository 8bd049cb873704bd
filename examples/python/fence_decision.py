#!/usr/bin/env python3
"""The fence decision in Python, checked against leasehold's test vectors.

    python3 fence_decision.py [path/to/fence-decision-vectors.json]

A fence you write in another language decides as every leasehold fence does; the package's
spec/fence-decision-vectors.json says how, case by case. This file is such a fence's decision
(no storage: the state comes in, the decision and the new state go out), and running it checks
it against every vector: it prints how many passed and exits 1 if any did not.
Tokens are Python ints (arbitrary precision), never floats.
"""

import json
import os
import sys


def passes(policy, token, mark, claimed):
    """Whether a write at `token` passes the mark under `policy`."""
    if policy == ">=":
        return token >= mark
    # '>': one write per grant; a mark a claim set (no write used it yet) lets that token write once.
    return token > mark or (token == mark and claimed)


def decide(state, request):
    """The decision on `request` for a scope in `state`: (answer dict, new state)."""
    mark, claimed, version = int(state["mark"]), state["claimed"], int(state["version"])
    applied = {(int(a["token"]), a["idempotencyKey"]) for a in state["applied"]}
    token, policy = int(request["token"]), request["policy"]
    refused = dict(state)
    if request["op"] == "claim":
        if not passes(policy, token, mark, claimed):
            return {"decision": "stale_fence", "highWaterMark": str(mark)}, refused
        new = dict(state, mark=str(token), claimed=token > mark or claimed)
        return {"decision": "applied"}, new
    key = request.get("idempotencyKey")
    # The mark first: a retry from a superseded writer must learn that it lost.
    if token < mark:
        return {"decision": "stale_fence", "highWaterMark": str(mark)}, refused
    if key is not None and (token, key) in applied:
        return {"decision": "duplicate"}, refused
    if not passes(policy, token, mark, claimed):
        return {"decision": "stale_fence", "highWaterMark": str(mark)}, refused
    expected = request.get("expectedVersion")
    if expected is not None and int(expected) != version:
        return {"decision": "version_mismatch", "currentVersion": str(version)}, refused
    new = dict(
        state,
        mark=str(max(mark, token)),
        claimed=False,
        version=str(version + 1 if expected is not None else version),
    )
    return {"decision": "applied"}, new


def check(vector):
    """The fields of the vector's `expect` that this decision gets wrong (empty: it passes)."""
    answer, after = decide(vector["state"], vector["request"])
    got = {**answer, "mark": after["mark"], "claimed": after["claimed"], "version": after["version"]}
    return [k for k, want in vector["expect"].items() if got.get(k) != want]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "..", "spec", "fence-decision-vectors.json")
    path = sys.argv[1] if len(sys.argv) > 1 else default
    with open(path, encoding="utf-8") as f:
        vectors = json.load(f)["vectors"]
    failed = [(v["name"], check(v)) for v in vectors]
    failed = [(name, fields) for name, fields in failed if fields]
    for name, fields in failed:
        print(f"FAIL {name}: {', '.join(fields)}")
    print(f"{len(vectors) - len(failed)}/{len(vectors)} fence decision vectors pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
