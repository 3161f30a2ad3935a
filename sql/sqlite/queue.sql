-- settle: the canonical queue table for SQLite 3.42+.
-- SQLite has no timestamp type: times are INTEGER microseconds since the epoch (UTC).
CREATE TABLE {table} (
    id           INTEGER PRIMARY KEY,
    payload      TEXT NOT NULL DEFAULT '{}',
    attempt      INTEGER NOT NULL DEFAULT 0,
    retry_after  INTEGER,
    locked_until INTEGER,
    created_at   INTEGER NOT NULL DEFAULT (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)
);
CREATE TABLE {table}_dead (
    id           INTEGER PRIMARY KEY,
    payload      TEXT NOT NULL DEFAULT '{}',
    attempt      INTEGER NOT NULL DEFAULT 0,
    retry_after  INTEGER,
    locked_until INTEGER,
    created_at   INTEGER NOT NULL
);
