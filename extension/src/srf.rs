//! Set-returning functions that hand PostgreSQL all their rows at once
//! (`SFRM_Materialize`), where pgrx's `TableIterator` returns one row per call.
//!
//! pgrx's value-per-call protocol re-enters the function (a Rust wrapper and
//! its `sigsetjmp` guard) for every row, forms a heap tuple per row, and the
//! executor then copies each into a tuplestore of its own. The claim and the
//! settles already hold every row when they return, so this module writes
//! them straight into the tuplestore, skipping the per-row call, tuple and
//! copy.
//!
//! The type is named `TableIterator` on purpose: `#[pg_extern]` recognises a
//! set-returning function by that name and writes the SQL `RETURNS TABLE (...)`
//! from its `name!` columns, and calls the type's [`RetAbi`] to return it.

use pgrx::callconv::RetAbi;
use pgrx::datum::IntoDatum;
use pgrx::pg_sys;
use std::marker::PhantomData;

/// The rows of a `RETURNS TABLE` function, returned in one tuplestore.
pub struct TableIterator<'a, Row> {
    rows: Vec<Row>,
    _life: PhantomData<&'a ()>,
}

impl<Row> TableIterator<'_, Row> {
    pub fn new(rows: impl IntoIterator<Item = Row>) -> Self {
        TableIterator {
            rows: rows.into_iter().collect(),
            _life: PhantomData,
        }
    }
}

/// A row as datums: a tuple of values that convert with [`IntoDatum`].
pub trait Row {
    const WIDTH: usize;
    fn into_datums(self, values: &mut [pg_sys::Datum], nulls: &mut [bool]);
}

fn put<T: IntoDatum>(v: T, value: &mut pg_sys::Datum, null: &mut bool) {
    match v.into_datum() {
        Some(d) => {
            *value = d;
            *null = false;
        }
        None => *null = true,
    }
}

macro_rules! row_impl {
    ($n:expr; $($t:ident $i:tt),+) => {
        impl<$($t: IntoDatum),+> Row for ($($t,)+) {
            const WIDTH: usize = $n;
            fn into_datums(self, values: &mut [pg_sys::Datum], nulls: &mut [bool]) {
                $(put(self.$i, &mut values[$i], &mut nulls[$i]);)+
            }
        }
    };
}
row_impl!(2; A 0, B 1);
row_impl!(4; A 0, B 1, C 2, D 3);
row_impl!(5; A 0, B 1, C 2, D 3, E 4);

fn not_a_set_context() {
    pgrx::ereport!(
        ERROR,
        pgrx::PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        "set-valued function called in context that cannot accept a set"
    );
}

unsafe impl<Rw: Row> RetAbi for TableIterator<'_, Rw> {
    type Item = Self;
    type Ret = Self;

    fn to_ret(self) -> Self::Ret {
        self
    }

    unsafe fn box_ret_in_fcinfo(fcinfo: pg_sys::FunctionCallInfo, ret: Self::Ret) -> pg_sys::Datum {
        use pg_sys::SetFunctionReturnMode::{SFRM_Materialize, SFRM_Materialize_Random};
        unsafe {
            let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
            if rsinfo.is_null()
                || (*rsinfo).type_ != pg_sys::NodeTag::T_ReturnSetInfo
                || (*rsinfo).allowedModes & SFRM_Materialize as i32 == 0
            {
                not_a_set_context();
            }
            // the tuplestore and its descriptor live as long as the query
            let old = pg_sys::MemoryContextSwitchTo((*(*rsinfo).econtext).ecxt_per_query_memory);
            let mut desc: pg_sys::TupleDesc = std::ptr::null_mut();
            let class = pg_sys::get_call_result_type(fcinfo, std::ptr::null_mut(), &mut desc);
            assert!(
                class == pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE && !desc.is_null(),
                "settle: a RETURNS TABLE function has a composite result type"
            );
            let desc = pg_sys::CreateTupleDescCopy(desc);
            assert_eq!(
                (*desc).natts as usize,
                Rw::WIDTH,
                "settle: columns of a RETURNS TABLE function"
            );
            let random = (*rsinfo).allowedModes & SFRM_Materialize_Random as i32 != 0;
            let store = pg_sys::tuplestore_begin_heap(random, false, pg_sys::work_mem);
            pg_sys::MemoryContextSwitchTo(old);
            // each row's datums are made in the caller's context; the tuplestore copies them
            let mut values = vec![pg_sys::Datum::from(0usize); Rw::WIDTH];
            let mut nulls = vec![true; Rw::WIDTH];
            for row in ret.rows {
                row.into_datums(&mut values, &mut nulls);
                pg_sys::tuplestore_putvalues(store, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
            }
            (*rsinfo).returnMode = SFRM_Materialize;
            (*rsinfo).setResult = store;
            (*rsinfo).setDesc = desc;
            (*fcinfo).isnull = true;
            pg_sys::Datum::from(0usize)
        }
    }

    unsafe fn move_into_fcinfo_fcx(self, _fcinfo: pg_sys::FunctionCallInfo) {}

    unsafe fn fill_fcinfo_fcx(&self, _fcinfo: pg_sys::FunctionCallInfo) {}
}
