"""A report write fenced inside its own transaction, with psycopg 3.

    python3 psycopg_write.py DSN SCHEMA SCOPE TOKEN BODY [--roll-back]

The fence's functions are installed by its migrations (PostgresFence.migrate(), once).
Prints the fence's answer: "applied" (committed with the write), "stale_fence HWM" or
"duplicate" (rolled back: the report row is exactly as it was). --roll-back rolls the
transaction back even after "applied", to show that the mark then stays where it was.
"""

import sys

import psycopg
from psycopg import sql


class Refused(Exception):
    """Raised inside the transaction so that psycopg rolls it back."""


def write_report(conn, schema, scope, token, body, roll_back=False):
    """The domain write and its fence in one transaction; the fence's status."""
    s = sql.Identifier(schema)
    try:
        with conn.transaction():
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.report (id, body, token) VALUES (%s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, token = EXCLUDED.token"
                ).format(s),
                (scope, body, token),
            )
            # The one-line fence: 'applied', 'duplicate' or 'stale_fence'.
            (status,) = conn.execute(
                sql.SQL("SELECT {}.leasehold_fence(%s, %s)").format(s), (scope, token)
            ).fetchone()
            if status != "applied" or roll_back:
                raise Refused(status)
            return status
    except Refused as refused:
        status = refused.args[0]
    if status == "stale_fence":
        # The mark that refused it, read after the rollback.
        row = conn.execute(
            sql.SQL("SELECT high_water FROM {}.leasehold_fence WHERE scope = %s").format(s),
            (scope,),
        ).fetchone()
        return f"stale_fence {row[0]}"
    return status


def main():
    dsn, schema, scope, token, body = sys.argv[1:6]
    roll_back = "--roll-back" in sys.argv[6:]
    with psycopg.connect(dsn, autocommit=True) as conn:
        print(write_report(conn, schema, scope, int(token), body, roll_back))


if __name__ == "__main__":
    main()
