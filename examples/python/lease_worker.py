"""A settle worker in the lease form, with psycopg 3.

Claims one delivery at a time, keeps its lease alive from a heartbeat thread,
settles it with ack, or with retry_after and a back-off that grows with the
attempt; a poison row reaches max_attempts and settle moves it to the dead
letter. Each settle claims the next delivery in the same call
(queue_complete_and_claim: one round trip per job). SIGTERM or Ctrl-C: the
delivery in hand is finished and settled, then the worker exits. Run several
processes for more throughput.

    PGHOST=... PGDATABASE=app QUEUE=jobs python3 lease_worker.py

Connection settings come from the usual libpq variables (PGHOST, PGPORT,
PGUSER, PGDATABASE, PGPASSWORD, PGSSLMODE) or DATABASE_URL.
"""

import os
import signal
import threading
import time
from datetime import timedelta

import psycopg

DSN = os.environ.get("DATABASE_URL", "")
QUEUE = os.environ.get("QUEUE", "jobs")
LEASE = timedelta(seconds=float(os.environ.get("LEASE_SECONDS", "30")))
BACKOFF = float(os.environ.get("BACKOFF_SECONDS", "1"))
IDLE = 1.0  # seconds between claims while the queue is empty

LEASE_LOST = "SQ001"  # settle's SQLSTATE: the delivery's lease went to another claim

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
signal.signal(signal.SIGINT, lambda *_: stop.set())


def handle(payload, attempt):
    """The job itself; raise to have it retried. (Here: simulated work.)"""
    time.sleep(payload.get("work_ms", 0) / 1000)
    if payload.get("poison") or attempt <= payload.get("fail_first", 0):
        raise RuntimeError("simulated failure")


class Heartbeat(threading.Thread):
    """Extends the lease of the delivery in hand every third of its length.

    queue_extend returns a new token and only the newest settles the delivery,
    so the token is shared with the settle under one lock."""

    def __init__(self):
        super().__init__(daemon=True)
        self.lock = threading.Lock()
        self.id = self.token = None

    def hold(self, id, token):
        with self.lock:
            self.id, self.token = id, token

    def settle(self, conn, outcome, delay, claim_next):
        """The delivery's result, and with claim_next the next delivery
        (id, attempt, token, payload; None when nothing was ready), held."""
        with self.lock:
            id, token, self.id = self.id, self.token, None
            if not claim_next:
                return conn.execute(
                    "SELECT queue_complete(%s, %s, %s, %s, %s)", (QUEUE, id, outcome, delay, token)
                ).fetchone()[0], None
            settled, *row = conn.execute(
                "SELECT settled, id, attempt, token, payload FROM queue_complete_and_claim(%s, %s, %s, %s, %s, 1, %s)",
                (QUEUE, id, outcome, delay, token, LEASE),
            ).fetchone()
            if row[0] is None:
                return settled, None
            self.id, self.token = row[0], row[2]
            return settled, row

    def release(self, conn):
        """Give the delivery in hand back unhandled: ready again at once."""
        with self.lock:
            id, token, self.id = self.id, self.token, None
            conn.execute("SELECT queue_release(%s, %s, %s)", (QUEUE, id, token))

    def run(self):
        with psycopg.connect(DSN, autocommit=True) as conn:
            while True:
                time.sleep(LEASE.total_seconds() / 3)
                with self.lock:
                    if self.id is None:
                        continue
                    try:
                        self.token = conn.execute(
                            "SELECT queue_extend(%s, %s, %s, %s)", (QUEUE, self.id, self.token, LEASE)
                        ).fetchone()[0]
                    except psycopg.Error as e:
                        if e.sqlstate != LEASE_LOST:
                            raise
                        # the settle will report it


def main():
    heartbeat = Heartbeat()
    heartbeat.start()
    with psycopg.connect(DSN, autocommit=True) as conn:
        row = None  # the delivery the last settle claimed
        while not stop.is_set():
            if row is None:
                row = conn.execute(
                    "SELECT id, attempt, token, payload FROM queue_claim(%s, 1, %s)", (QUEUE, LEASE)
                ).fetchone()
                if row is None:
                    stop.wait(IDLE)
                    continue
                heartbeat.hold(row[0], row[2])
            id, attempt, token, payload = row
            row = None
            print(f"claimed {id} attempt {attempt}", flush=True)
            try:
                handle(payload, attempt)
                outcome, delay = "ack", None
            except Exception as e:
                outcome = "retry_after"
                delay = timedelta(seconds=min(BACKOFF * 2 ** (attempt - 1), 3600))
                print(f"failed {id}: {e}", flush=True)
            try:
                # stopping: settle only, claim nothing more
                result, row = heartbeat.settle(conn, outcome, delay, claim_next=not stop.is_set())
            except psycopg.Error as e:
                if e.sqlstate != LEASE_LOST:
                    raise
                # the lease ran out and another worker has the row now: it runs
                # again there, so handlers must tolerate running twice
                print(f"lease lost {id}", flush=True)
                continue
            if result == "delayed":
                print(f"retry {id} in {delay.total_seconds():g}s", flush=True)
            elif result == "dead_lettered":
                print(f"dead {id}", flush=True)
            else:
                print(f"acked {id}", flush=True)
        if row is not None:
            # the last settle claimed it as the stop came
            heartbeat.release(conn)
    print("stopped", flush=True)


if __name__ == "__main__":
    main()
