//! The extension's SQL API as the client calls it (docs/sql-reference.md),
//! each statement with its parameter types, so that it can run prepared or,
//! behind a transaction pooler, unnamed ([`super::connect::Statements`]).
//! Durations travel as microseconds, tokens as `timestamptz`.

use super::connect::Stmt;
use tokio_postgres::types::Type;

const TEXT: Type = Type::TEXT;
const INT4: Type = Type::INT4;
const INT8: Type = Type::INT8;
const TSTZ: Type = Type::TIMESTAMPTZ;
const TEXTS: Type = Type::TEXT_ARRAY;
const TSTZS: Type = Type::TIMESTAMPTZ_ARRAY;
const JSONB: Type = Type::JSONB;

pub(crate) const CLAIM: Stmt = Stmt {
    sql: "SELECT id, attempt, token, payload FROM queue_claim($1, $2, $3::bigint * interval '1 microsecond')",
    types: &[TEXT, INT4, INT8],
};
pub(crate) const COMPLETE: Stmt = Stmt {
    sql: "SELECT queue_complete($1, $2, $3, $4::bigint * interval '1 microsecond', $5)",
    types: &[TEXT, TEXT, TEXT, INT8, TSTZ],
};
pub(crate) const COMPLETE_MANY: Stmt = Stmt {
    sql: "SELECT id, result FROM queue_complete_many($1, $2, $3, $4::bigint * interval '1 microsecond', $5)",
    types: &[TEXT, TEXTS, TEXT, INT8, TSTZS],
};
/// A lease settle and the next one-row claim in one statement (extension
/// 0.12.0, [`CHAIN_SINCE`]).
pub(crate) const COMPLETE_AND_CLAIM: Stmt = Stmt {
    sql: "SELECT settled, id, attempt, token, payload FROM queue_complete_and_claim($1, $2, $3, \
          $4::bigint * interval '1 microsecond', $5, 1, $6::bigint * interval '1 microsecond')",
    types: &[TEXT, TEXT, TEXT, INT8, TSTZ, INT8],
};
/// The extension version that has `queue_complete_and_claim`.
pub(crate) const CHAIN_SINCE: &str = "0.12.0";
pub(crate) const RELEASE: Stmt = Stmt {
    sql: "SELECT queue_release($1, $2, $3)",
    types: &[TEXT, TEXT, TSTZ],
};
pub(crate) const EXTEND: Stmt = Stmt {
    sql: "SELECT queue_extend($1, $2, $3, $4::bigint * interval '1 microsecond')",
    types: &[TEXT, TEXT, TSTZ, INT8],
};
pub(crate) const STATS: Stmt = Stmt {
    sql: "SELECT queue, form, ready, delayed, in_flight, dead, \
          CAST(EXTRACT(EPOCH FROM oldest_ready_age) * 1000000 AS BIGINT) FROM queue_stats($1)",
    types: &[TEXT],
};
/// The extension's version (`pg_extension`, when installed with `CREATE
/// EXTENSION`), and whether `settle_edition()` exists: only the SQL edition
/// has it, installed with `CREATE EXTENSION` (pg_tle) or with psql.
pub(crate) const VERSION: Stmt = Stmt {
    sql: "SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'settle'), \
          pg_catalog.to_regprocedure('settle_edition()') IS NOT NULL",
    types: &[],
};
pub(crate) const EDITION: Stmt = Stmt {
    sql: "SELECT edition, version FROM settle_edition()",
    types: &[],
};
pub(crate) const TABLE_EXISTS: Stmt = Stmt {
    sql: "SELECT to_regclass($1) IS NOT NULL",
    types: &[TEXT],
};
/// The descriptor's arguments, as `queue_register` and `queue_differences` take them.
const DESCRIPTOR: &[Type] = &[TEXT, TEXT, TEXT, INT4, TEXT, JSONB, TEXT];
pub(crate) const REGISTER: Stmt = Stmt {
    sql: "SELECT queue_register($1, $2::text::regclass, $3, $4, $5, $6, $7::text::regclass)",
    types: DESCRIPTOR,
};
pub(crate) const DIFFERENCES: Stmt = Stmt {
    sql: "SELECT field, registered, given \
          FROM queue_differences($1, $2::text::regclass, $3, $4, $5, $6, $7::text::regclass)",
    types: DESCRIPTOR,
};
pub(crate) const REGISTER_OUTCOME: Stmt = Stmt {
    sql: "SELECT queue_register_outcome($1, $2, $3)",
    types: &[TEXT, TEXT, TEXT],
};
pub(crate) const IS_REGISTERED: Stmt = Stmt {
    sql: "SELECT EXISTS (SELECT 1 FROM settle_queues WHERE queue = $1)",
    types: &[TEXT],
};
/// Whether the registered queue has a retry_after column, and its custom outcomes.
pub(crate) const REGISTERED: Stmt = Stmt {
    sql: "SELECT (columns->>'retry_after') IS NOT NULL, outcomes::text FROM settle_queues WHERE queue = $1",
    types: &[TEXT],
};
pub(crate) const QUEUES: Stmt = Stmt {
    sql: "SELECT queue, form, ready, delayed, in_flight, dead, \
          CAST(EXTRACT(EPOCH FROM oldest_ready_age) * 1000000 AS BIGINT) FROM queue_stats()",
    types: &[],
};
/// Needs extension 0.7.0 ([`HEALTH_SINCE`]).
pub(crate) const HEALTH: Stmt = Stmt {
    sql: "SELECT queue, dead_tuples, live_tuples, table_bytes, index_bytes, \
          CAST(EXTRACT(EPOCH FROM now() - last_vacuum) * 1000000 AS BIGINT), horizon_holder, \
          horizon_xmin_age, CAST(EXTRACT(EPOCH FROM horizon_age) * 1000000 AS BIGINT) \
          FROM queue_health($1)",
    types: &[TEXT],
};
/// The extension version that has `queue_health`.
pub(crate) const HEALTH_SINCE: &str = "0.7.0";
pub(crate) const DEAD_ROWS: Stmt = Stmt {
    sql: "SELECT id, attempt, row FROM queue_dead($1, $2, $3)",
    types: &[TEXT, INT8, TEXTS],
};
pub(crate) const REQUEUE_DEAD_IDS: Stmt = Stmt {
    sql: "SELECT queue_requeue_dead($1, $2)",
    types: &[TEXT, TEXTS],
};
pub(crate) const PURGE_DEAD: Stmt = Stmt {
    sql: "SELECT queue_purge_dead($1, $2::bigint * interval '1 microsecond', $3)",
    types: &[TEXT, INT8, TEXTS],
};
pub(crate) const STATEMENTS: Stmt = Stmt {
    sql: "SELECT statement, sql FROM queue_sql($1)",
    types: &[TEXT],
};
