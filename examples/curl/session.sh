#!/bin/sh
# A lease on a leasehold server with curl: acquire, renew, release.
#
#   LEASEHOLD_URL=http://127.0.0.1:7400 sh session.sh jobs/nightly
#
# Needs only curl and sed. Prints each answer as the server sent it.
set -eu
server="${LEASEHOLD_URL:-http://127.0.0.1:7400}"
key="${1:-jobs/nightly}" # a plain key: no quotes or backslashes (they would need JSON escaping)

post() { # post PATH JSON: prints the answer; fails on an error status, showing the answer
  curl -sS --fail-with-body -H 'content-type: application/json' -d "$2" "$server$1"
}
field() { # field NAME JSON: a string field of a compact JSON answer
  printf '%s' "$2" | sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"
}

acquired=$(post /v1/acquire "{\"key\":\"$key\",\"ttl\":\"30s\",\"wait\":\"5s\",\"ownerId\":\"curl\"}")
echo "acquire: $acquired"
# The token is a decimal string: keep it as text (a JSON number could lose digits).
ref="\"key\":\"$key\",\"leaseId\":\"$(field leaseId "$acquired")\",\"token\":\"$(field token "$acquired")\""

# Someone else is refused while the lease is held: 409 with {"error":{"code":"busy",…}}.
other="{\"key\":\"$key\",\"ttl\":\"30s\",\"ownerId\":\"someone-else\"}"
echo "second owner: $(curl -sS -w ' HTTP %{http_code}' -H 'content-type: application/json' -d "$other" "$server/v1/acquire")"

echo "renew: $(post /v1/renew "{$ref,\"ttl\":\"30s\"}")"
echo "release: $(post /v1/release "{$ref}")"
