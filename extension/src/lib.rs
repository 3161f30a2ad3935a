//! settle — claim a row, run the handler, settle it with an outcome, for queues
//! kept in ordinary PostgreSQL tables. See README.md and docs/ (docs/sql-reference.md: every function).
//!
//! Layout: `api/` holds every SQL-callable function; `register` validates,
//! compares and stores queue descriptors; `create` makes a queue's tables;
//! `desc` loads and caches them with their kept plans; `catalog` and `citus`
//! read the catalogs both use; `sql` builds the SQL of each queue, by
//! statement family; `ops` runs claims and outcomes; `held` keeps what a
//! session holds (advisory keys, row_lock claims); `mark` where its claims
//! start their scan; `error` raises the product
//! SQLSTATEs. docs/architecture.md walks a claim and a settle through them.

use pgrx::prelude::*;

mod api;
mod catalog;
mod citus;
mod create;
mod desc;
mod error;
mod held;
mod keys;
mod mark;
mod ops;
mod rawjsonb;
mod register;
mod rowjson;
mod sql;
mod srf;

::pgrx::pg_module_magic!();

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    held::init();
    mark::init();
    keys::init();
    desc::init();
}

/// pgrx's `#[pg_trigger]` would panic, with a backtrace, when the function is
/// called outside a trigger; this one is written by hand to say so instead.
#[no_mangle]
pub extern "C" fn pg_finfo_settle_registry_changed_wrapper(
) -> &'static pgrx::pg_sys::Pg_finfo_record {
    static V1: pgrx::pg_sys::Pg_finfo_record = pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// Trigger on the registry: tell every backend (at commit) to drop its cached
/// descriptors, by invalidating the registry's relcache entry.
///
/// # Safety
/// Called by PostgreSQL's function manager with a valid `fcinfo`.
#[pg_guard]
#[no_mangle]
pub unsafe extern "C-unwind" fn settle_registry_changed_wrapper(
    fcinfo: pgrx::pg_sys::FunctionCallInfo,
) -> pgrx::pg_sys::Datum {
    let context = unsafe { (*fcinfo).context };
    if context.is_null() || !unsafe { pgrx::is_a(context, pgrx::pg_sys::NodeTag::T_TriggerData) } {
        error::raise_sqlstate(
            "0A000",
            "settle_registry_changed() is the registry's trigger function: it can only be called as a trigger".into(),
        );
    }
    // SAFETY: checked above that the context is the trigger's data
    unsafe {
        let data = context.cast::<pgrx::pg_sys::TriggerData>();
        pgrx::pg_sys::CacheInvalidateRelcacheByRelid((*(*data).tg_relation).rd_id);
    }
    pgrx::pg_sys::Datum::from(0usize)
}

// The registry, the helpers written in SQL and the health functions: the same text in
// both editions (sqlapi/common, which the SQL edition includes too).
extension_sql_file!(
    "../../sqlapi/common/registry.sql",
    name = "bootstrap",
    bootstrap
);

extension_sql_file!(
    "../../sqlapi/common/helpers.sql",
    name = "sql_helpers",
    requires = ["bootstrap"]
);

extension_sql_file!(
    "../../sqlapi/common/health.sql",
    name = "health",
    requires = ["bootstrap"]
);

extension_sql!(
    r#"
CREATE FUNCTION "settle_registry_changed"()
	RETURNS TRIGGER
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'settle_registry_changed_wrapper';
CREATE TRIGGER settle_registry_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON settle_queues
    FOR EACH STATEMENT EXECUTE FUNCTION settle_registry_changed();
"#,
    name = "registry_trigger",
    requires = ["bootstrap"]
);
