-- settle: the canonical queue table for MariaDB 10.6+ / MySQL 8.
-- Times are DATETIME(6) in UTC (settle sets time_zone = '+00:00' on its connections).
CREATE TABLE {table} (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    payload      JSON NOT NULL,
    attempt      INT NOT NULL DEFAULT 0,
    retry_after  DATETIME(6) NULL,
    locked_until DATETIME(6) NULL,
    created_at   DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
);
CREATE TABLE {table}_dead LIKE {table};
