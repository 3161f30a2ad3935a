//! settle's conformance suite lives in `tests/conformance.rs`: one body of
//! scenarios run against every backend × claim form of SPEC §5 (PostgreSQL with
//! the extension, PostgreSQL portable, MariaDB, SQLite), skipping only by
//! declared capability. `scripts/test.sh` starts the servers and sets:
//!
//! - `SETTLE_TEST_PG`: libpq string of a database with the extension (client)
//! - `SETTLE_TEST_PG_EXT_URL`: the same database as a `postgres://` URL (setup)
//! - `SETTLE_TEST_PG_URL`: a database *without* the extension (portable path)
//! - `SETTLE_TEST_MYSQL_URL`: a MariaDB database
