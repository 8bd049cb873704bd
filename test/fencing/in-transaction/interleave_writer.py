"""The Python side of test/fencing/in-transaction/two-languages: fenced writes through the SQL function.

    python3 interleave_writer.py DSN SCHEMA SCOPE ROUNDS

Prints "ready", waits for a line on stdin (the TypeScript writer starts at the same time),
then ROUNDS times: takes a new token from the shared sequence (as a new lease would get),
writes with it, then writes once more with its previous token (the paused old owner's late
write). Each write is one transaction: the fence, then the log row only when applied. Prints
one line per write: "TOKEN STATUS".
"""

import sys

import psycopg
from psycopg import sql


def fenced_write(conn, s, scope, token):
    with conn.transaction():
        (status,) = conn.execute(
            sql.SQL("SELECT {}.leasehold_fence(%s, %s)").format(s), (scope, token)
        ).fetchone()
        if status == "applied":
            conn.execute(
                sql.SQL("INSERT INTO {}.write_log (scope, token, writer) VALUES (%s, %s, 'py')").format(s),
                (scope, token),
            )
    return status


def main():
    dsn, schema, scope, rounds = sys.argv[1:5]
    s = sql.Identifier(schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        print("ready", flush=True)
        sys.stdin.readline()
        previous = None
        for _ in range(int(rounds)):
            (token,) = conn.execute(sql.SQL("SELECT nextval('{}.tokens')").format(s)).fetchone()
            print(token, fenced_write(conn, s, scope, token), flush=True)
            if previous is not None:
                print(previous, fenced_write(conn, s, scope, previous), flush=True)
            previous = token


if __name__ == "__main__":
    main()
