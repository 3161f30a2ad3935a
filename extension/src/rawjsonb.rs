//! A jsonb value passed through untouched: the claim reads the row as jsonb and
//! returns it as jsonb. pgrx's `JsonB` would turn each into text, parse it into a
//! serde value, print it again and parse it again on the way out.

use pgrx::datum::{FromDatum, IntoDatum};
use pgrx::pg_sys;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable,
};
use pgrx::PgMemoryContexts;

/// A detoasted jsonb datum copied into a memory context that outlives SPI.
pub struct RawJsonb(pg_sys::Datum);

impl RawJsonb {
    /// A jsonb varlena already allocated where it outlives SPI.
    pub fn from_allocated(d: pg_sys::Datum) -> RawJsonb {
        RawJsonb(d)
    }
}

impl FromDatum for RawJsonb {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null || datum.is_null() {
            None
        } else {
            Some(RawJsonb(pg_sys::Datum::from(unsafe {
                pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr())
            })))
        }
    }

    unsafe fn from_datum_in_memory_context(
        mut memory_context: PgMemoryContexts,
        datum: pg_sys::Datum,
        is_null: bool,
        typoid: pg_sys::Oid,
    ) -> Option<Self> {
        // the copy lives in the caller's context (SPI's parent), not in SPI's own
        unsafe {
            memory_context.switch_to(|_| Self::from_polymorphic_datum(datum, is_null, typoid))
        }
    }
}

impl IntoDatum for RawJsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

unsafe impl pgrx::callconv::BoxRet for RawJsonb {
    unsafe fn box_into<'fcx>(
        self,
        fcinfo: &mut pgrx::callconv::FcInfo<'fcx>,
    ) -> pgrx::datum::Datum<'fcx> {
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}

unsafe impl SqlTranslatable for RawJsonb {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(RawJsonb);
    const TYPE_ORIGIN: pgrx::pgrx_sql_entity_graph::metadata::TypeOrigin =
        pgrx::pgrx_sql_entity_graph::metadata::TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("jsonb"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        Ok(ReturnsRef::One(SqlMappingRef::literal("jsonb")));
}
