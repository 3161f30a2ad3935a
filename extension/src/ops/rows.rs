//! The rows of the statement SPI just ran, and the transaction it runs in.

use pgrx::pg_sys;

/// Each of the `rows` result rows of the last SPI statement run, deformed once
/// into values and nulls (pgrx's per-column `get` walks the tuple for every
/// column it is asked for).
///
/// # Safety
/// The last SPI statement run returned `rows` rows, and its tuple table has
/// not been freed.
pub(super) unsafe fn spi_rows(rows: usize, mut each: impl FnMut(&[pg_sys::Datum], &[bool])) {
    let tt = pg_sys::SPI_tuptable;
    assert!(
        !tt.is_null() && (*tt).numvals as usize == rows,
        "settle: a statement's result is SPI's current tuple table"
    );
    let td = (*tt).tupdesc;
    let natts = (*td).natts as usize;
    let mut values = vec![pg_sys::Datum::from(0usize); natts];
    let mut nulls = vec![true; natts];
    for i in 0..rows {
        pg_sys::heap_deform_tuple(
            *(*tt).vals.add(i),
            td,
            values.as_mut_ptr(),
            nulls.as_mut_ptr(),
        );
        each(&values, &nulls);
    }
}

/// A text datum's bytes as a String.
///
/// # Safety
/// `d` is a valid, non-null text datum.
pub(super) unsafe fn text_of(d: pg_sys::Datum) -> String {
    String::from_utf8_lossy(crate::rowjson::detoasted(d)).into_owned()
}

pub(super) fn in_transaction_block() -> bool {
    unsafe { pg_sys::IsTransactionBlock() }
}
