//! The claimed row as jsonb, written straight into jsonb's binary format.
//!
//! SPEC: a delivery's payload is the whole row as jsonb, what `to_jsonb(row)`
//! gives. `to_jsonb` goes through the general path for every row: integers
//! printed as text and parsed back as numeric, the nested jsonb payload walked
//! token by token and rebuilt, each value categorised by type, the object sorted.
//! That was about half the server time of a 100-row row_lock claim. For tables
//! whose columns all have the types below (the canonical layout and the usual
//! custom ones), the claim statement returns the row itself and this module
//! writes the same jsonb: keys in jsonb's order (length, then bytes), integers
//! as numeric, timestamps through PostgreSQL's own JSON formatter, a nested jsonb
//! container copied as it is. Any other column type keeps `to_jsonb` (chosen
//! when the queue's statements are built). pg_regress `10_row_json` compares the two.
//!
//! Format (src/include/utils/jsonb.h): a varlena whose data is a container —
//! a u32 header (count | JB_FOBJECT), then 2n JEntries (all keys, then all
//! values), then the keys' bytes, then the values' bytes. A JEntry holds a type
//! and the length of its data, or, every JB_OFFSET_STRIDE-th entry, the end
//! offset instead. Numerics and containers are 4-byte aligned from the start of
//! the varlena, the padding counted in the entry.

use pgrx::pg_sys;

const JB_FOBJECT: u32 = 0x2000_0000;
const JB_FSCALAR: u32 = 0x1000_0000;
const JB_CMASK: u32 = 0x0FFF_FFFF;
const JENTRY_OFFLENMASK: u32 = 0x0FFF_FFFF;
const JENTRY_TYPEMASK: u32 = 0x7000_0000;
const JENTRY_HAS_OFF: u32 = 0x8000_0000;
const JENTRY_ISSTRING: u32 = 0x0000_0000;
const JENTRY_ISNUMERIC: u32 = 0x1000_0000;
const JENTRY_ISBOOL_FALSE: u32 = 0x2000_0000;
const JENTRY_ISBOOL_TRUE: u32 = 0x3000_0000;
const JENTRY_ISNULL: u32 = 0x4000_0000;
const JENTRY_ISCONTAINER: u32 = 0x5000_0000;
const JB_OFFSET_STRIDE: usize = 32;

/// How a column is written: the one list of natively written types.
#[derive(Clone, Copy)]
enum Kind {
    Int2,
    Int4,
    Int8,
    Bool,
    /// text, varchar: the bytes as they are
    Text,
    Jsonb,
    /// timestamptz, timestamp, date (the type, for PostgreSQL's formatter)
    DateTime(pg_sys::Oid),
    Uuid,
}

fn kind_of(t: pg_sys::Oid) -> Option<Kind> {
    use pg_sys::*;
    Some(match t {
        INT2OID => Kind::Int2,
        INT4OID => Kind::Int4,
        INT8OID => Kind::Int8,
        BOOLOID => Kind::Bool,
        TEXTOID | VARCHAROID => Kind::Text,
        JSONBOID => Kind::Jsonb,
        TIMESTAMPTZOID | TIMESTAMPOID | DATEOID => Kind::DateTime(t),
        UUIDOID => Kind::Uuid,
        _ => return None,
    })
}

/// Column types written natively; `to_jsonb` for anything else.
pub fn supported(t: pg_sys::Oid) -> bool {
    kind_of(t).is_some()
}

struct Col {
    /// index in the tuple descriptor
    att: usize,
    name: Vec<u8>,
    kind: Kind,
}

/// A claimed row's composite datum, read from SPI as it is (no copy): the
/// encoder turns it into jsonb before SPI's memory goes.
pub struct RowDatum(pub pg_sys::Datum);

impl RowDatum {
    /// The row's tuple header (detoasted, should the datum be compressed).
    ///
    /// # Safety
    /// The datum is a valid composite datum.
    pub unsafe fn header(&self) -> pg_sys::HeapTupleHeader {
        pg_sys::pg_detoast_datum(self.0.cast_mut_ptr()) as pg_sys::HeapTupleHeader
    }
}

impl pgrx::datum::FromDatum for RowDatum {
    unsafe fn from_polymorphic_datum(
        d: pg_sys::Datum,
        is_null: bool,
        _t: pg_sys::Oid,
    ) -> Option<Self> {
        (!is_null).then_some(RowDatum(d))
    }
}

impl pgrx::datum::IntoDatum for RowDatum {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }
    fn type_oid() -> pg_sys::Oid {
        pg_sys::RECORDOID
    }
    fn is_compatible_with(_other: pg_sys::Oid) -> bool {
        // the queue table's row type or a CTE's record: read only where the claim
        // statement puts a whole row
        true
    }
}

/// Writes rows of one row type; built from the first claimed row.
pub struct RowEncoder {
    type_id: pg_sys::Oid,
    typmod: i32,
    natts: usize,
    /// live columns in jsonb key order
    cols: Vec<Col>,
    values: Vec<pg_sys::Datum>,
    nulls: Vec<bool>,
    /// the row being written, and its entries (type, length): kept between rows
    buf: Vec<u8>,
    entries: Vec<(u32, usize)>,
}

/// A varlena with its 4-byte header (short and compressed values are expanded).
unsafe fn varlena<'a>(d: pg_sys::Datum) -> &'a [u8] {
    let v = pg_sys::pg_detoast_datum(d.cast_mut_ptr());
    let len = (*(v as *const u32) >> 2) as usize; // VARSIZE_4B, little-endian
    std::slice::from_raw_parts(v as *const u8, len)
}

/// A varlena's data.
unsafe fn detoasted<'a>(d: pg_sys::Datum) -> &'a [u8] {
    &varlena(d)[4..]
}

fn pad4(buf: &mut Vec<u8>) -> usize {
    let pad = (4 - buf.len() % 4) % 4;
    buf.extend(std::iter::repeat_n(0u8, pad));
    pad
}

impl RowEncoder {
    /// For the row type of `h` (a row's tuple header), or None if a column's
    /// type is not one written natively.
    ///
    /// # Safety
    /// `h` is a valid composite datum's tuple header.
    pub unsafe fn for_row(h: pg_sys::HeapTupleHeader) -> Option<RowEncoder> {
        let (type_id, typmod) = (
            pgrx::htup::heap_tuple_header_get_type_id(h),
            pgrx::htup::heap_tuple_header_get_typmod(h),
        );
        let td = pg_sys::lookup_rowtype_tupdesc(type_id, typmod);
        let natts = (*td).natts as usize;
        let attrs = (*td).attrs.as_slice(natts);
        let cols: Option<Vec<Col>> = attrs
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.attisdropped)
            .map(|(i, a)| {
                Some(Col {
                    att: i,
                    name: std::ffi::CStr::from_ptr(a.attname.data.as_ptr())
                        .to_bytes()
                        .to_vec(),
                    kind: kind_of(a.atttypid)?,
                })
            })
            .collect();
        pg_sys::DecrTupleDescRefCount(td);
        let mut cols = cols?;
        // jsonb's key order: shorter first, then bytewise
        cols.sort_by(|a, b| (a.name.len(), &a.name).cmp(&(b.name.len(), &b.name)));
        Some(RowEncoder {
            type_id,
            typmod,
            natts,
            cols,
            values: vec![pg_sys::Datum::from(0usize); natts],
            nulls: vec![true; natts],
            buf: Vec::with_capacity(256),
            entries: Vec::new(),
        })
    }

    /// Whether the row of `h` has the row type this encoder was built for.
    ///
    /// # Safety
    /// `h` is a valid composite datum's tuple header.
    pub unsafe fn fits(&self, h: pg_sys::HeapTupleHeader) -> bool {
        pgrx::htup::heap_tuple_header_get_type_id(h) == self.type_id
            && pgrx::htup::heap_tuple_header_get_typmod(h) == self.typmod
    }

    /// The row as a jsonb varlena, allocated in `ctx`.
    ///
    /// # Safety
    /// `h` is the tuple header of a row of this encoder's row type; `ctx` a live
    /// memory context.
    pub unsafe fn encode(
        &mut self,
        h: pg_sys::HeapTupleHeader,
        ctx: pg_sys::MemoryContext,
    ) -> pg_sys::Datum {
        let td = pg_sys::lookup_rowtype_tupdesc(self.type_id, self.typmod);
        if (*td).natts as usize != self.natts {
            // the row type changed since this encoder was built (it lives for
            // one claim statement, so this cannot happen); never deform into
            // arrays of the wrong size
            pg_sys::DecrTupleDescRefCount(td);
            pgrx::error!("settle: the queue table's row type changed during a claim");
        }
        let mut tuple = pg_sys::HeapTupleData {
            t_len: pgrx::htup::heap_tuple_header_get_datum_length(h) as u32,
            t_data: h,
            ..Default::default()
        };
        pg_sys::heap_deform_tuple(
            &mut tuple,
            td,
            self.values.as_mut_ptr(),
            self.nulls.as_mut_ptr(),
        );
        pg_sys::DecrTupleDescRefCount(td);

        let n = self.cols.len();
        let buf = &mut self.buf;
        buf.clear();
        buf.extend([0u8; 4]); // varlena header, set below
        buf.extend((n as u32 | JB_FOBJECT).to_le_bytes());
        let jentries = buf.len();
        buf.resize(jentries + 8 * n, 0);
        let data = buf.len();
        let entries = &mut self.entries;
        entries.clear();
        for c in &self.cols {
            buf.extend_from_slice(&c.name);
            entries.push((JENTRY_ISSTRING, c.name.len()));
        }
        for c in &self.cols {
            let e = if self.nulls[c.att] {
                (JENTRY_ISNULL, 0)
            } else {
                write_value(buf, c.kind, self.values[c.att])
            };
            entries.push(e);
        }
        let mut end = 0usize;
        for (i, &(kind, len)) in entries.iter().enumerate() {
            end += len;
            let field = if i % JB_OFFSET_STRIDE == 0 {
                end as u32 | JENTRY_HAS_OFF
            } else {
                len as u32
            };
            let at = jentries + 4 * i;
            buf[at..at + 4].copy_from_slice(&(kind | field).to_le_bytes());
        }
        if buf.len() - data > JENTRY_OFFLENMASK as usize {
            pgrx::error!("settle: a claimed row exceeds the maximum jsonb size");
        }
        // SET_VARSIZE (4-byte header, little-endian)
        let total = buf.len() as u32;
        buf[0..4].copy_from_slice(&(total << 2).to_le_bytes());
        let out = pg_sys::MemoryContextAlloc(ctx, buf.len()) as *mut u8;
        std::ptr::copy_nonoverlapping(buf.as_ptr(), out, buf.len());
        pg_sys::Datum::from(out)
    }
}

/// Append one value's data; returns its JEntry type and length (padding included).
unsafe fn write_value(buf: &mut Vec<u8>, kind: Kind, d: pg_sys::Datum) -> (u32, usize) {
    let numeric = |buf: &mut Vec<u8>, v: i64| {
        let pad = pad4(buf);
        let n = pg_sys::int64_to_numeric(v);
        // the numeric varlena as it is, header included
        let bytes = varlena(pg_sys::Datum::from(n));
        buf.extend_from_slice(bytes);
        let len = bytes.len();
        pg_sys::pfree(n.cast());
        (JENTRY_ISNUMERIC, pad + len)
    };
    let string = |buf: &mut Vec<u8>, s: &[u8]| {
        buf.extend_from_slice(s);
        (JENTRY_ISSTRING, s.len())
    };
    match kind {
        Kind::Int2 => numeric(buf, d.value() as i16 as i64),
        Kind::Int4 => numeric(buf, d.value() as i32 as i64),
        Kind::Int8 => numeric(buf, d.value() as i64),
        Kind::Bool => {
            if d.value() & 0xff != 0 {
                (JENTRY_ISBOOL_TRUE, 0)
            } else {
                (JENTRY_ISBOOL_FALSE, 0)
            }
        }
        Kind::Text => string(buf, detoasted(d)),
        Kind::DateTime(t) => {
            let p = pg_sys::JsonEncodeDateTime(std::ptr::null_mut(), d, t, std::ptr::null());
            let r = string(buf, std::ffi::CStr::from_ptr(p).to_bytes());
            pg_sys::pfree(p.cast());
            r
        }
        Kind::Uuid => {
            let u = std::slice::from_raw_parts(d.cast_mut_ptr::<u8>() as *const u8, 16);
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let start = buf.len();
            for (i, b) in u.iter().enumerate() {
                if matches!(i, 4 | 6 | 8 | 10) {
                    buf.push(b'-');
                }
                buf.extend([HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
            }
            (JENTRY_ISSTRING, buf.len() - start)
        }
        Kind::Jsonb => jsonb_value(buf, detoasted(d)),
    }
}

/// A jsonb column nested as a value: its root container copied (4-byte aligned),
/// or, for a scalar root (stored as a one-element array), that element.
unsafe fn jsonb_value(buf: &mut Vec<u8>, c: &[u8]) -> (u32, usize) {
    let header = u32::from_le_bytes(c[0..4].try_into().unwrap());
    if header & JB_FSCALAR == 0 {
        let pad = pad4(buf);
        buf.extend_from_slice(c);
        return (JENTRY_ISCONTAINER, pad + c.len());
    }
    debug_assert_eq!(header & JB_CMASK, 1);
    let je = u32::from_le_bytes(c[4..8].try_into().unwrap());
    let len = (je & JENTRY_OFFLENMASK) as usize; // the first entry: offset = length
    let elem = &c[8..8 + len]; // data starts 4-byte aligned: no padding before it
    let kind = je & JENTRY_TYPEMASK;
    if kind == JENTRY_ISNUMERIC {
        let pad = pad4(buf);
        buf.extend_from_slice(elem);
        (kind, pad + len)
    } else {
        buf.extend_from_slice(elem);
        (kind, len)
    }
}
