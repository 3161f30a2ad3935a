"""A settle worker in the row_lock form, with psycopg 3.

Each delivery is claimed, handled and settled in one transaction: the
handler's own writes commit together with the ack, or not at all. A worker
that dies mid-job leaves nothing behind: its transaction rolls back, the row
lock goes with it, and the row is ready again at once. A failed handler's
writes roll back to a savepoint while the retry_after is kept. SIGTERM or
Ctrl-C: the transaction in hand commits, then the worker exits.

    PGHOST=... PGDATABASE=app QUEUE=orders python3 row_lock_worker.py

The handler here records a receipt per job in a table of the application's
(CREATE TABLE receipts (job text PRIMARY KEY, attempt int)): with the row_lock
form each job's receipt is written exactly once, however often it is tried.
"""

import os
import signal
import threading
import time
from datetime import timedelta

import psycopg

DSN = os.environ.get("DATABASE_URL", "")
QUEUE = os.environ.get("QUEUE", "orders")
BACKOFF = float(os.environ.get("BACKOFF_SECONDS", "1"))
IDLE = 1.0  # seconds between claims while the queue is empty

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
signal.signal(signal.SIGINT, lambda *_: stop.set())


def handle(conn, id, payload, attempt):
    """The job, writing through the claim's transaction; raise to retry."""
    conn.execute("INSERT INTO receipts (job, attempt) VALUES (%s, %s)", (id, attempt))
    time.sleep(payload.get("work_ms", 0) / 1000)
    if payload.get("poison") or attempt <= payload.get("fail_first", 0):
        raise RuntimeError("simulated failure")


def work_one(conn):
    """Claim, handle and settle one delivery in one transaction; False when
    the queue had nothing ready."""
    with conn.transaction():
        row = conn.execute("SELECT id, attempt, payload FROM queue_claim(%s, 1)", (QUEUE,)).fetchone()
        if row is None:
            return False
        id, attempt, payload = row
        print(f"claimed {id} attempt {attempt}", flush=True)
        try:
            # a savepoint: a failing handler's writes go, the claim stays
            with conn.transaction():
                handle(conn, id, payload, attempt)
            outcome, delay = "ack", None
        except Exception as e:
            outcome = "retry_after"
            delay = timedelta(seconds=min(BACKOFF * 2 ** (attempt - 1), 3600))
            print(f"failed {id}: {e}", flush=True)
        result = conn.execute(
            "SELECT queue_complete(%s, %s, %s, %s)", (QUEUE, id, outcome, delay)
        ).fetchone()[0]
    # committed: the receipt and the settle together
    if result == "delayed":
        print(f"retry {id} in {delay.total_seconds():g}s", flush=True)
    elif result == "dead_lettered":
        print(f"dead {id}", flush=True)
    else:
        print(f"acked {id}", flush=True)
    return True


def main():
    # not autocommit: conn.transaction() opens the BEGIN the row_lock form needs
    with psycopg.connect(DSN) as conn:
        while not stop.is_set():
            if not work_one(conn):
                stop.wait(IDLE)
    print("stopped", flush=True)


if __name__ == "__main__":
    main()
