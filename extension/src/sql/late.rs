//! The keyed claims that test the key rule after the row lock for a row
//! another transaction has touched.
//!
//! A row whose `xmax` is set is being claimed or settled by another
//! transaction, or was (a write rolled back, a lock). Its key is tested once
//! SKIP LOCKED has kept it, so concurrent claims do not probe the key index
//! for each other's rows; the rest are tested before the lock, so that a
//! queue whose first rows wait behind their keys locks only rows it takes.
//! A touched row that is not its key's first is locked and not taken.
//! advisory candidates do the same before the key lock (`claim`): the
//! advisory take tests every row's key again once the session holds it.

use super::bounded::From;
use super::*;

/// A claim's start at the session's mark, in parameter `from`, if it has one.
fn start(from: Option<usize>) -> From {
    from.map_or(From::Bottom, From::At)
}

/// The column that says a candidate was touched (see the module's comment).
const TOUCHED: &str = "_s_kl";

/// The locking subquery's column of the payload it made.
const PAYLOAD: &str = "_s_row";

impl Shape {
    /// Whether a keyed claim tests the key after the lock for touched rows:
    /// a plain heap table, whose rows carry `xmax`.
    pub(super) fn probes_after_lock(&self) -> bool {
        self.ordering_key.is_some() && self.plain_heap
    }

    /// Whether the row of alias `a` has been touched.
    fn touched(a: &str) -> String {
        format!("NOT ({a}.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid)")
    }

    /// What a candidate of alias `a` satisfies before the lock: ready by
    /// itself (and with `from` at or past that parameter's id), and its key
    /// free unless touched.
    pub(super) fn ready_before_lock(&self, a: &str, from: Option<usize>) -> String {
        let own = self.starting_at(join_and(self.ready_own(a)), a, from);
        let free = self.key_free(a).expect("an ordering key");
        format!("{own} AND ({} OR {free})", Self::touched(a))
    }

    /// The columns the locking subquery adds for the test after the lock.
    fn after_lock_columns(&self, a: &str) -> String {
        let (k, _) = self.ordering_key.as_ref().expect("an ordering key");
        format!(
            "{} AS _s_kk, {} AS _s_ki, {} AS {TOUCHED}",
            self.col(a, k),
            self.id_of(a),
            Self::touched(a)
        )
    }

    /// The test after the lock, of the locking subquery `_s_l`.
    fn ready_after_lock(&self) -> String {
        format!(
            "NOT _s_l.{TOUCHED} OR {}",
            self.key_free_of("_s_l._s_kk", "_s_l._s_ki")
        )
    }

    /// [`lease_candidates`](Self::lease_candidates) of a keyed queue.
    pub(super) fn lease_candidates_probing_late(
        &self,
        from: Option<usize>,
        n: Option<u32>,
    ) -> String {
        let (source, order) = self.keyed_source("_s_c", start(from), "", n);
        format!(
            "SELECT _s_l._s_tid FROM (SELECT {cid} AS _s_tid, {cols} FROM {source} WHERE {ready} \
             ORDER BY {order} FOR UPDATE OF _s_c SKIP LOCKED) _s_l WHERE {after} {limit}",
            cid = self.locator("_s_c"),
            cols = self.after_lock_columns("_s_c"),
            ready = self.ready_before_lock("_s_c", from),
            after = self.ready_after_lock(),
            limit = limit(n),
        )
    }

    /// [`claim_row_lock`](Self::claim_row_lock) of a keyed queue.
    pub(super) fn row_lock_probing_late(
        &self,
        from: Option<usize>,
        except: bool,
        n: Option<u32>,
    ) -> String {
        let held = |a: &str| match except {
            true => self.except_held(a, 2),
            false => String::new(),
        };
        let (source, order) = self.keyed_source("_s_t", start(from), &held("_s_r"), n);
        // a bounded read (`_s_r`) leaves the held rows out itself
        let except = match self.bounds_keyed_read() {
            true => String::new(),
            false => held("_s_t"),
        };
        let locked = format!(
            "SELECT {}, _s_t.ctid AS _s_tid, {} FROM {source} WHERE {}{except} \
             ORDER BY {order} FOR UPDATE OF _s_t SKIP LOCKED",
            self.row_lock_inputs("_s_t"),
            self.after_lock_columns("_s_t"),
            self.ready_before_lock("_s_t", from),
        );
        format!(
            "SELECT {cols} FROM ({locked}) _s_l WHERE {after} {limit}",
            cols = self.row_lock_columns_of_locked("_s_l"),
            after = self.ready_after_lock(),
            limit = limit(n),
        )
    }

    /// What the locking subquery passes up of the row of alias `a` for
    /// [`row_lock_columns`](Self::row_lock_columns): the row's own columns
    /// when they are the payload (none named like the statement's aliases,
    /// see `desc`), else the id and attempt roles' columns and the payload,
    /// made here (a whole row's jsonb before the added columns join it).
    fn row_lock_inputs(&self, a: &str) -> String {
        if self.native_row {
            return format!("{a}.*");
        }
        let mut c = vec![self.id_of(a)];
        c.extend(self.attempt.as_ref().map(|x| self.col(a, x)));
        c.push(format!("{} AS {PAYLOAD}", self.row_out(a)));
        c.join(", ")
    }

    /// [`row_lock_columns`](Self::row_lock_columns) of the locking subquery `l`.
    fn row_lock_columns_of_locked(&self, l: &str) -> String {
        let ctid = format!("{l}._s_tid");
        if self.native_row {
            return self.row_lock_columns(l, &ctid);
        }
        self.row_lock_columns_with(l, &ctid, &format!("{l}.{PAYLOAD}"))
    }
}
