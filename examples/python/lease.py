#!/usr/bin/env python3
"""Hold a lease on a leasehold server from Python, with the standard library only.

    LEASEHOLD_URL=http://127.0.0.1:7400 python3 lease.py jobs/nightly

Acquires the key (waiting up to 5 s if someone holds it), shows that a second owner is
refused, renews once, and releases the lease however the work ends. Set LEASEHOLD_API_TOKEN
when the server requires a bearer token.
"""

import json
import os
import sys
import urllib.error
import urllib.request

SERVER = os.environ.get("LEASEHOLD_URL", "http://127.0.0.1:7400").rstrip("/")


class LeaseError(Exception):
    """An error answer of the server: HTTP status, code (busy, lost, …) and message."""

    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code


def call(path, body):
    """POSTs JSON to the server and returns the decoded answer; raises LeaseError on 4xx/5xx."""
    request = urllib.request.Request(
        SERVER + path,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    api_token = os.environ.get("LEASEHOLD_API_TOKEN")
    if api_token:
        request.add_header("authorization", f"Bearer {api_token}")
    try:
        # Longer than the 5 s wait: the server answers a waiting acquire when it decides.
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as e:
        error = json.load(e)["error"]
        raise LeaseError(e.code, error["code"], error["message"]) from None


def main():
    key = sys.argv[1] if len(sys.argv) > 1 else "jobs/nightly"
    lease = call("/v1/acquire", {"key": key, "ttl": "30s", "wait": "5s", "ownerId": "python"})
    # Tokens are decimal strings: they can exceed what a float holds exactly. Keep them as
    # text, or use int(), never float().
    token = lease["token"]
    print(f"acquired {key} with token {token}")
    ref = {"key": key, "leaseId": lease["leaseId"], "token": token}
    try:
        try:
            call("/v1/acquire", {"key": key, "ttl": "30s", "ownerId": "someone-else"})
            print("unexpected: a second owner got the lease")
        except LeaseError as e:
            print(f"a second owner is refused: {e.status} {e.code}")
        # Long work renews before the TTL runs out; send the token with every protected write.
        renewed = call("/v1/renew", {**ref, "ttl": "30s"})
        print(f"renewed: {renewed['status']}")
    finally:
        released = call("/v1/release", ref)
        print(f"released: {released['status']}")


if __name__ == "__main__":
    main()
