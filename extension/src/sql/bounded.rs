//! How far a keyed claim in id order reads.
//!
//! Every row that waits behind a taken head fails the key rule, and a claim
//! in id order passes them all before the free heads after them: one key's
//! backlog in front of the others made a claim read all of it. So these
//! statements read at most [`read_bound`] ready rows (a `LIMIT` under the key
//! test, which stays lazy), and `ops::reach` goes on when one comes back
//! short having read that many: it walks the keys (few of them) or reads on
//! past the last row read ([`keyed_read_extent`](Shape::keyed_read_extent)).
//! The bound's join by ctid cost a claim whose first rows are free a quarter
//! of its throughput (10,000 keys, bench/NOTES.md), so `ops::reach` chooses
//! these statements only where a session has seen rows wait behind their
//! heads.

use super::*;

/// Ready rows a keyed claim of `n` rows reads per statement: 8 per row asked
/// for, and 256 more.
pub fn read_bound(n: i64) -> i64 {
    n.saturating_mul(8).saturating_add(256)
}

/// [`read_bound`] in a statement: a literal with the batch `n`, else of `$1`.
fn read_bound_sql(n: Option<u32>) -> String {
    match n {
        Some(n) => read_bound(i64::from(n)).to_string(),
        None => format!("($1 OPERATOR(pg_catalog.*) 8 {PLUS} 256)"),
    }
}

/// Where a keyed claim's read starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum From {
    Bottom,
    /// at the id in parameter `$n` (text)
    At(usize),
    /// past the id in parameter `$n` (text)
    After(usize),
}

impl Shape {
    /// Whether this queue's keyed claims in id order can read a bounded
    /// number of rows: it can walk its keys instead, and `ops::claim` can put
    /// the rows of two statements in id order (an integer id).
    pub fn can_bound_keyed_read(&self) -> bool {
        self.probes_after_lock() && self.walks_keys() && self.int_id
    }

    /// Whether this shape's keyed claims in id order read a bounded number of rows.
    pub(super) fn bounds_keyed_read(&self) -> bool {
        self.bounded_read && self.can_bound_keyed_read()
    }

    /// The source of a keyed claim's locking select, alias `a`, and its
    /// ORDER BY: the table in claim order, or (see [`bounds_keyed_read`](Self::bounds_keyed_read))
    /// the first rows ready by themselves from `from`, not in `except` (an
    /// `AND …` condition of alias `_s_r`), joined to the table by ctid so
    /// that the lock still comes after the key test.
    pub(super) fn keyed_source(
        &self,
        a: &str,
        from: From,
        except: &str,
        n: Option<u32>,
    ) -> (String, String) {
        if !self.bounds_keyed_read() {
            return (format!("{} {a}", self.table), self.claim_order(a));
        }
        let read = self.keyed_read("_s_r.ctid AS _s_rc, ", from, except);
        (
            format!(
                "({read} LIMIT {bound}) _s_rd JOIN {t} {a} ON {a}.ctid {EQ} _s_rd._s_rc",
                bound = read_bound_sql(n),
                t = self.table,
            ),
            "_s_rd._s_ri".into(),
        )
    }

    /// The rows ready by themselves from `from` in id order, alias `_s_r`:
    /// `cols` (each followed by a comma) then the id as `_s_ri`.
    fn keyed_read(&self, cols: &str, from: From, except: &str) -> String {
        let mut ready = self.ready_own("_s_r");
        let id = self.id_of("_s_r");
        match from {
            From::Bottom => {}
            From::At(p) => ready.push(format!("{id} {GE} {}", self.cast_id(&format!("${p}")))),
            From::After(p) => ready.push(format!("{id} {GT} {}", self.cast_id(&format!("${p}")))),
        }
        format!(
            "SELECT {cols}{id} AS _s_ri FROM {t} _s_r WHERE {ready}{except} ORDER BY {id}",
            t = self.table,
            ready = join_and(ready),
        )
    }

    /// How many rows a bounded keyed read from `from` finds, up to the bound
    /// in $1 (int8), and the last one's id (text): whether a claim that came
    /// back short stopped at its bound, and where to read on. With `from`,
    /// $2 (text) the id to start at; with `except`, the next parameter
    /// (text[]) the ids the transaction holds.
    pub fn keyed_read_extent(&self, from: bool, except: bool) -> String {
        let except = if except {
            self.except_held("_s_r", if from { 3 } else { 2 })
        } else {
            String::new()
        };
        let start = if from { From::At(2) } else { From::Bottom };
        format!(
            "SELECT pg_catalog.count(*), (pg_catalog.max(_s_x._s_ri))::pg_catalog.text FROM ({} LIMIT $1) _s_x",
            self.keyed_read("", start, &except),
        )
    }
}
