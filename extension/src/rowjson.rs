//! The claimed row as jsonb, written straight into jsonb's binary format.
//!
//! docs/semantics.md: without a payload column, a delivery's payload is the whole row as jsonb, what `to_jsonb(row)`
//! gives. `to_jsonb` goes through the general path for every row: integers
//! printed as text and parsed back as numeric, the nested jsonb payload walked
//! token by token and rebuilt, each value categorised by type, the object sorted.
//! That was about half the server time of a 100-row row_lock claim. For tables
//! whose columns all have the types below (the canonical layout and the usual
//! custom ones), the claim statement returns the row's columns and this module
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
    /// index among the row's columns as the claim statement returns them
    att: usize,
    name: Vec<u8>,
    kind: Kind,
}

/// Writes rows of one queue table: built from its columns (live ones, in table
/// order, as the claim statement lists them) when its descriptor is loaded.
pub struct RowEncoder {
    /// live columns in jsonb key order
    cols: Vec<Col>,
    /// what every row starts with: the varlena header (set per row), the
    /// object's count, the keys' entries, room for the values' entries, the
    /// keys' bytes. A key's entry never depends on the values (keys come
    /// first), so it is written once here.
    prefix: Vec<u8>,
    /// the row being written, and its values' (type, length): kept between rows
    buf: Vec<u8>,
    entries: Vec<(u32, usize)>,
}

/// A varlena's bytes, header included, without copying when it is stored
/// plainly (1-byte header of a short value, or 4-byte uncompressed); compressed
/// or out-of-line values are detoasted. Returns (bytes, header length).
unsafe fn varlena_parts<'a>(d: pg_sys::Datum) -> (&'a [u8], usize) {
    let p = d.cast_mut_ptr::<u8>() as *const u8;
    let b0 = *p;
    if b0 & 0x01 == 0x01 && b0 != 0x01 {
        // VARATT_IS_1B and not VARATT_IS_1B_E (little-endian): short, inline
        let len = (b0 >> 1) as usize;
        return (std::slice::from_raw_parts(p, len), 1);
    }
    if b0 & 0x03 == 0x00 {
        // VARATT_IS_4B_U: 4-byte header, uncompressed
        let len = ((p as *const u32).read_unaligned() >> 2) as usize;
        return (std::slice::from_raw_parts(p, len), 4);
    }
    let v = pg_sys::pg_detoast_datum(d.cast_mut_ptr());
    let len = (*(v as *const u32) >> 2) as usize; // VARSIZE_4B, little-endian
    (std::slice::from_raw_parts(v as *const u8, len), 4)
}

/// A varlena's data.
pub unsafe fn detoasted<'a>(d: pg_sys::Datum) -> &'a [u8] {
    let (bytes, header) = varlena_parts(d);
    &bytes[header..]
}

fn pad4(buf: &mut Vec<u8>) -> usize {
    let pad = (4 - buf.len() % 4) % 4;
    buf.extend(std::iter::repeat_n(0u8, pad));
    pad
}

impl RowEncoder {
    /// For a row of these columns (name, type), or None if a column's type is
    /// not one written natively.
    pub fn for_columns(columns: &[(String, pg_sys::Oid)]) -> Option<RowEncoder> {
        let mut cols = columns
            .iter()
            .enumerate()
            .map(|(i, (name, t))| {
                Some(Col {
                    att: i,
                    name: name.as_bytes().to_vec(),
                    kind: kind_of(*t)?,
                })
            })
            .collect::<Option<Vec<Col>>>()?;
        // jsonb's key order: shorter first, then bytewise
        cols.sort_by(|a, b| (a.name.len(), &a.name).cmp(&(b.name.len(), &b.name)));
        let n = cols.len();
        let mut prefix = Vec::with_capacity(8 + 8 * n);
        prefix.extend([0u8; 4]); // varlena header, set per row
        prefix.extend((n as u32 | JB_FOBJECT).to_le_bytes());
        let mut end = 0usize;
        for (i, c) in cols.iter().enumerate() {
            end += c.name.len();
            prefix.extend((JENTRY_ISSTRING | entry_field(i, c.name.len(), end)).to_le_bytes());
        }
        prefix.resize(prefix.len() + 4 * n, 0); // the values' entries, per row
        for c in &cols {
            prefix.extend_from_slice(&c.name);
        }
        Some(RowEncoder {
            cols,
            prefix,
            buf: Vec::with_capacity(256),
            entries: Vec::new(),
        })
    }

    /// How many columns a row has.
    pub fn width(&self) -> usize {
        self.cols.len()
    }

    /// The row whose columns are `values`/`nulls` (in table order, as many as
    /// [`width`](Self::width)) as a jsonb varlena, allocated in `ctx`.
    ///
    /// # Safety
    /// Each value is a valid datum of its column's type; `ctx` a live memory context.
    pub unsafe fn encode(
        &mut self,
        values: &[pg_sys::Datum],
        nulls: &[bool],
        ctx: pg_sys::MemoryContext,
    ) -> pg_sys::Datum {
        assert!(values.len() >= self.cols.len() && nulls.len() >= self.cols.len());
        let n = self.cols.len();
        let buf = &mut self.buf;
        buf.clear();
        buf.extend_from_slice(&self.prefix);
        // the values' entries follow the keys' (header, count, n key entries)
        let values_at = 8 + 4 * n;
        let data = values_at + 4 * n;
        let keys_len = buf.len() - data;
        let entries = &mut self.entries;
        entries.clear();
        for c in &self.cols {
            let e = if nulls[c.att] {
                (JENTRY_ISNULL, 0)
            } else {
                write_value(buf, c.kind, values[c.att])
            };
            entries.push(e);
        }
        let mut end = keys_len;
        for (j, &(kind, len)) in entries.iter().enumerate() {
            end += len;
            let at = values_at + 4 * j;
            buf[at..at + 4].copy_from_slice(&(kind | entry_field(n + j, len, end)).to_le_bytes());
        }
        if buf.len() - data > JENTRY_OFFLENMASK as usize {
            pgrx::error!("settle: a claimed row exceeds the maximum jsonb size");
        }
        // SET_VARSIZE (4-byte header, little-endian)
        let total = buf.len() as u32;
        buf[0..4].copy_from_slice(&(total << 2).to_le_bytes());
        #[cfg(debug_assertions)]
        {
            // the same row built by PostgreSQL's own jsonb code, byte for byte
            // (10_row_json compares jsonb_send text, which cannot see entry
            // layout or numeric spelling)
            let theirs = self.postgres_row(values, nulls);
            assert_eq!(
                &self.buf[..],
                &theirs[..],
                "settle: a claimed row's jsonb differs from PostgreSQL's"
            );
        }
        let buf = &self.buf;
        let out = pg_sys::MemoryContextAlloc(ctx, buf.len()) as *mut u8;
        std::ptr::copy_nonoverlapping(buf.as_ptr(), out, buf.len());
        pg_sys::Datum::from(out)
    }
}

#[cfg(debug_assertions)]
impl RowEncoder {
    /// The row as PostgreSQL's jsonb code writes it (`pushJsonbValue` and
    /// `JsonbValueToJsonb`, what `to_jsonb` ends in), for debug builds to
    /// compare `encode` with.
    unsafe fn postgres_row(&self, values: &[pg_sys::Datum], nulls: &[bool]) -> Vec<u8> {
        use pg_sys::jbvType::*;
        use pg_sys::JsonbIteratorToken::*;
        let string = |b: &[u8]| {
            let mut v: pg_sys::JsonbValue = std::mem::zeroed();
            v.type_ = jbvString;
            v.val.string.len = b.len() as i32;
            v.val.string.val = pg_sys::pnstrdup(b.as_ptr().cast(), b.len());
            v
        };
        let mut state: *mut pg_sys::JsonbParseState = std::ptr::null_mut();
        pg_sys::pushJsonbValue(&mut state, WJB_BEGIN_OBJECT, std::ptr::null_mut());
        for c in &self.cols {
            let mut key = string(&c.name);
            pg_sys::pushJsonbValue(&mut state, WJB_KEY, &mut key);
            let d = values[c.att];
            let mut v: pg_sys::JsonbValue = std::mem::zeroed();
            if nulls[c.att] {
                v.type_ = jbvNull;
            } else {
                match c.kind {
                    Kind::Int2 | Kind::Int4 | Kind::Int8 => {
                        let i = match c.kind {
                            Kind::Int2 => d.value() as i16 as i64,
                            Kind::Int4 => d.value() as i32 as i64,
                            _ => d.value() as i64,
                        };
                        v.type_ = jbvNumeric;
                        v.val.numeric = pg_sys::int64_to_numeric(i);
                    }
                    Kind::Bool => {
                        v.type_ = jbvBool;
                        v.val.boolean = d.value() & 0xff != 0;
                    }
                    Kind::Text => v = string(detoasted(d)),
                    Kind::DateTime(t) => {
                        let p = pg_sys::JsonEncodeDateTime(
                            std::ptr::null_mut(),
                            d,
                            t,
                            std::ptr::null(),
                        );
                        v = string(std::ffi::CStr::from_ptr(p).to_bytes());
                    }
                    Kind::Uuid => {
                        let p =
                            pg_sys::OidOutputFunctionCall(pg_sys::Oid::from(pg_sys::F_UUID_OUT), d);
                        v = string(std::ffi::CStr::from_ptr(p).to_bytes());
                    }
                    Kind::Jsonb => {
                        let c = detoasted(d);
                        v.type_ = jbvBinary;
                        v.val.binary.len = c.len() as i32;
                        v.val.binary.data = c.as_ptr() as *mut pg_sys::JsonbContainer;
                    }
                }
            }
            pg_sys::pushJsonbValue(&mut state, WJB_VALUE, &mut v);
        }
        let res = pg_sys::pushJsonbValue(&mut state, WJB_END_OBJECT, std::ptr::null_mut());
        let j = pg_sys::JsonbValueToJsonb(res);
        let (bytes, _) = varlena_parts(pg_sys::Datum::from(j));
        bytes.to_vec()
    }
}

/// The length-or-offset part of the `i`-th JEntry (keys, then values) of an
/// entry `len` bytes long ending at `end`: every JB_OFFSET_STRIDE-th entry
/// holds its end offset, the others their length.
fn entry_field(i: usize, len: usize, end: usize) -> u32 {
    if i.is_multiple_of(JB_OFFSET_STRIDE) {
        end as u32 | JENTRY_HAS_OFF
    } else {
        len as u32
    }
}

/// Append one value's data; returns its JEntry type and length (padding included).
unsafe fn write_value(buf: &mut Vec<u8>, kind: Kind, d: pg_sys::Datum) -> (u32, usize) {
    let numeric = |buf: &mut Vec<u8>, v: i64| {
        let pad = pad4(buf);
        let len = push_int_numeric(buf, v);
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
            // PostgreSQL writes into a buffer of MAXDATELEN + 1 given to it
            // (palloc'ing one otherwise)
            let mut text = [0 as std::ffi::c_char; pg_sys::MAXDATELEN as usize + 1];
            let p = pg_sys::JsonEncodeDateTime(text.as_mut_ptr(), d, t, std::ptr::null());
            string(buf, std::ffi::CStr::from_ptr(p).to_bytes())
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

/// Append an integer as the numeric varlena `int64_to_numeric` makes (4-byte
/// header; returns its length), without that function's two allocations and
/// its general digit arithmetic: two integers per claimed row (id, attempt).
///
/// numeric.c: a value with no fractional digits and a weight that fits takes
/// numeric's short format — a u16 header (0x8000, 0x2000 when negative, the
/// weight in the low 7 bits) and then base-10000 digits, most significant
/// first, with trailing zero digits dropped; zero has no digits. Debug builds
/// check the bytes with the whole row (`RowEncoder::postgres_row` builds its
/// integers with `int64_to_numeric`).
fn push_int_numeric(buf: &mut Vec<u8>, v: i64) -> usize {
    const NBASE: u64 = 10_000;
    // |i64| < 10^19: at most five base-10000 digits, least significant first
    let mut digits = [0u16; 5];
    let mut n = 0;
    let mut u = v.unsigned_abs();
    while u > 0 {
        digits[n] = (u % NBASE) as u16;
        u /= NBASE;
        n += 1;
    }
    // zero: no digits, weight 0, not negative, so the header is 0x8000
    let weight = n.saturating_sub(1) as u16;
    let lowest = digits[..n].iter().position(|&d| d != 0).unwrap_or(n);
    let kept = &digits[lowest..n];
    let sign = if v < 0 { 0x2000u16 } else { 0 };
    let header = 0x8000 | sign | weight;
    let len = 4 + 2 + 2 * kept.len();
    buf.extend(((len as u32) << 2).to_le_bytes()); // SET_VARSIZE, 4-byte header
    buf.extend(header.to_le_bytes());
    for d in kept.iter().rev() {
        buf.extend(d.to_le_bytes());
    }
    len
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
