//! The extension's SQL API as the client calls it (docs/sql-reference.md).
//! Durations travel as microseconds, tokens as `timestamptz`.

pub(crate) const CLAIM_SQL: &str =
    "SELECT id, attempt, token, payload FROM queue_claim($1, $2, $3::bigint * interval '1 microsecond')";
pub(crate) const COMPLETE_SQL: &str =
    "SELECT queue_complete($1, $2, $3, $4::bigint * interval '1 microsecond', $5)";
pub(crate) const COMPLETE_MANY_SQL: &str =
    "SELECT id, result FROM queue_complete_many($1, $2, $3, $4::bigint * interval '1 microsecond', $5)";
pub(crate) const RELEASE_SQL: &str = "SELECT queue_release($1, $2, $3)";
pub(crate) const EXTEND_SQL: &str =
    "SELECT queue_extend($1, $2, $3, $4::bigint * interval '1 microsecond')";
pub(crate) const STATS_SQL: &str = "SELECT queue, form, ready, delayed, in_flight, dead, \
     CAST(EXTRACT(EPOCH FROM oldest_ready_age) * 1000000 AS BIGINT) FROM queue_stats($1)";
pub(crate) const VERSION_SQL: &str =
    "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'settle'";
pub(crate) const TABLE_EXISTS_SQL: &str = "SELECT to_regclass($1) IS NOT NULL";
pub(crate) const REGISTER_SQL: &str =
    "SELECT queue_register($1, $2::text::regclass, $3, $4, $5, $6::jsonb, $7::text::regclass)";
pub(crate) const REGISTER_OUTCOME_SQL: &str = "SELECT queue_register_outcome($1, $2, $3)";
pub(crate) const HAS_RETRY_AFTER_SQL: &str =
    "SELECT (columns->>'retry_after') IS NOT NULL FROM settle_queues WHERE queue = $1";
pub(crate) const QUEUES_SQL: &str = "SELECT queue, form, ready, delayed, in_flight, dead, \
     CAST(EXTRACT(EPOCH FROM oldest_ready_age) * 1000000 AS BIGINT) FROM queue_stats()";
pub(crate) const DEAD_ROWS_SQL: &str =
    "SELECT id, attempt, row FROM queue_dead($1, $2, $3::text[])";
pub(crate) const REQUEUE_DEAD_IDS_SQL: &str = "SELECT queue_requeue_dead($1, $2::text[])";
pub(crate) const PURGE_DEAD_SQL: &str =
    "SELECT queue_purge_dead($1, $2::bigint * interval '1 microsecond', $3::text[])";
pub(crate) const STATEMENTS_SQL: &str = "SELECT statement, sql FROM queue_sql($1)";
