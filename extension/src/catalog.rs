//! Catalog lookups the descriptor code shares: a table's columns, names and
//! kind, the schema settle lives in, and SPI's result unwrapping.

use pgrx::pg_sys;
use pgrx::spi::{SpiClient, SpiResult};

pub fn spi<T>(r: SpiResult<T>) -> T {
    r.unwrap_or_else(|e| panic!("settle: SPI: {e}"))
}

/// The quoted schema settle is installed in. Looked up on every call (the
/// callers are registration, descriptor loads and stats, none per claim): an
/// install is not relocatable, but it can be dropped and created again in
/// another schema during a session's life, which a cached name would miss.
pub fn ext_schema(client: &SpiClient<'_>) -> String {
    spi(client
        .select(
            "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e \
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace \
             WHERE e.extname OPERATOR(pg_catalog.=) 'settle'",
            None,
            &[],
        )
        .and_then(|t| t.first().get_one::<String>()))
    .expect("settle is installed")
}

pub struct Column {
    pub name: String,
    pub type_oid: pg_sys::Oid,
    pub generated: bool,
}

pub fn columns_of(client: &SpiClient<'_>, rel: pg_sys::Oid) -> Vec<Column> {
    let t = spi(client.select(
        "SELECT a.attname::pg_catalog.text, a.atttypid, a.attgenerated OPERATOR(pg_catalog.<>) '' \
         FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 \
         AND NOT a.attisdropped ORDER BY a.attnum",
        None,
        &[rel.into()],
    ));
    t.map(|r| Column {
        name: spi(r.get::<String>(1)).unwrap(),
        type_oid: spi(r.get::<pg_sys::Oid>(2)).unwrap(),
        generated: spi(r.get::<bool>(3)).unwrap(),
    })
    .collect()
}

/// A plain table of the heap access method, whose ctid names one row version
/// (not a partitioned table, where the same ctid exists in every partition).
pub fn plain_heap(client: &SpiClient<'_>, rel: pg_sys::Oid) -> bool {
    spi(client
        .select(
            "SELECT c.relkind OPERATOR(pg_catalog.=) 'r' AND c.relam OPERATOR(pg_catalog.=) $2 \
             FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
            None,
            &[rel.into(), pg_sys::HEAP_TABLE_AM_OID.into()],
        )
        .and_then(|t| t.first().get_one::<bool>()))
    .unwrap_or(false)
}

pub fn qualified_name(client: &SpiClient<'_>, rel: pg_sys::Oid) -> Option<String> {
    spi(client
        .select(
            "SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname) \
             FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
             WHERE c.oid OPERATOR(pg_catalog.=) $1",
            None,
            &[rel.into()],
        )
        .and_then(|t| if t.is_empty() { Ok(None) } else { t.first().get_one::<String>() }))
}

pub fn type_name(t: pg_sys::Oid) -> String {
    unsafe {
        let p = pg_sys::format_type_be_qualified(t);
        let s = std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
        pg_sys::pfree(p.cast());
        s
    }
}
