//! The statements of a keyed queue's claim that visit each key once.
//!
//! A claim in id order passes every row that waits behind a taken head, so
//! one key's backlog in front of the others made it read the whole backlog
//! (docs/semantics.md, "How far a keyed claim reads"). These statements find
//! each key's first row in the `(ordering_key, id)` index instead — the only
//! row of its key that can be ready — and count the keys, so that the claim
//! (`claim` one level up) can choose.

use super::*;

/// Keys a queue may have for every claim to visit them.
pub(crate) const KEYS_ALWAYS_WALKED: usize = 16;

/// Keys a queue may have for a claim to visit them where reading in id order
/// would pass rows that wait: from the lowest id, and past a bounded read that
/// came back short. Visiting a key costs about what testing a few rows does,
/// so with more keys a walk could cost more than reading on.
pub(crate) const KEYS_WALKED: usize = 512;

/// Ids a bounded read of a claim of `n` spans (integer ids: at most that
/// many rows): 8 per row asked for, and 256 more.
pub(crate) fn read_bound(n: usize) -> i64 {
    (n as i64).saturating_mul(8).saturating_add(256)
}

/// Rows without a key a walk offers a claim of `n` beside the heads.
pub(crate) fn unkeyed_read(n: usize) -> usize {
    n.saturating_mul(8).saturating_add(64)
}

impl Shape {
    /// This queue's claims can visit its keys: an ordering key, claims in id
    /// order (no priority), and no group (its key index spans every queue of
    /// the table).
    pub(crate) fn walks_keys(&self) -> bool {
        self.ordering_key.is_some() && self.priority.is_none() && self.group.is_none()
    }

    /// The queue's distinct keys, at most `cap`: a `WITH` clause (or none)
    /// and a derived table `_s_ks(v)`. A `GROUP BY` where it skips from key
    /// to key ([`Dialect::finds_keys_by_group_by`]), else a recursive walk.
    fn key_set(&self, cap: usize) -> (String, String) {
        let k = self.ordering_key.as_deref().expect("a keyed queue");
        let (t, bk) = (&self.table, self.c("_s_b", k));
        if self.d.finds_keys_by_group_by() {
            return (
                String::new(),
                format!(
                    "(SELECT {bk} AS v FROM {t} _s_b WHERE {bk} IS NOT NULL GROUP BY {bk} LIMIT {cap}) _s_ks"
                ),
            );
        }
        let rows = |cond: String| {
            let mut v = self.mine("_s_b");
            v.push(cond);
            join_and(v)
        };
        (
            format!(
                "WITH RECURSIVE _s_k(v, n) AS (\
                   SELECT (SELECT {bk} FROM {t} _s_b WHERE {first} ORDER BY {bk} LIMIT 1), 1 \
                   UNION ALL \
                   SELECT (SELECT {bk} FROM {t} _s_b WHERE {next} ORDER BY {bk} LIMIT 1), _s_k.n + 1 \
                   FROM _s_k WHERE _s_k.v IS NOT NULL AND _s_k.n < {cap}) ",
                first = rows(format!("{bk} IS NOT NULL")),
                next = rows(format!("{bk} > _s_k.v")),
            ),
            "(SELECT _s_k.v FROM _s_k WHERE _s_k.v IS NOT NULL) _s_ks".into(),
        )
    }

    /// How many keys the queue has, counted up to `cap`.
    pub(crate) fn key_count_sql(&self, cap: usize) -> String {
        let (with, keys) = self.key_set(cap);
        format!("{with}SELECT COUNT(*) FROM {keys}")
    }

    /// How far a claim's step in id order reaches (integer ids): of the first
    /// rows ready by themselves from the id bound first (`from`; else the
    /// lowest), at most the limit bound next, how many there are and the last
    /// one's id (as text). The step's claim then reads those ids
    /// ([`Scan::Below`]).
    pub(crate) fn step_extent_sql(&self, from: bool) -> String {
        let d = self.d;
        let rid = self.c("_s_r", &self.id);
        let mut own = self.ready_own("_s_r");
        let mut limit = 1;
        if from {
            own.push(format!("{rid} >= {}", d.id_param(&d.p(1), self.id_kind)));
            limit = 2;
        }
        format!(
            "SELECT COUNT(*), {} FROM (SELECT {rid} AS _s_i FROM {} _s_r WHERE {} ORDER BY {rid} LIMIT {}) _s_x",
            d.id_text("MAX(_s_x._s_i)"),
            self.table,
            join_and(own),
            d.p(limit),
        )
    }

    /// The ids (as text) of the ready rows a claim may take, in id order:
    /// the first row of each key (at most `cap` keys) if it is ready by
    /// itself, and the first `unkeyed` ready rows without a key. The claim's
    /// own statement tests each again, its key too, as it locks it.
    pub(crate) fn heads_sql(&self, cap: usize, unkeyed: usize) -> String {
        let d = self.d;
        let k = self.ordering_key.as_deref().expect("a keyed queue");
        let (t, id) = (&self.table, &self.id);
        let (with, keys) = self.key_set(cap);
        let hk = self.c("_s_h", k);
        let mut own = self.mine("_s_h");
        own.push(format!("{hk} = _s_ks.v"));
        let heads = format!(
            "SELECT (SELECT {hid} FROM {t} _s_h WHERE {own} ORDER BY {hk}, {hid} LIMIT 1) AS h FROM {keys}",
            hid = self.c("_s_h", id),
            own = own.join(" AND "),
        );
        let cols = |a: &str| format!("{} AS i, {} AS t", self.c(a, id), d.id_text(&self.c(a, id)));
        let mut free = self.ready_own("_s_u");
        free.push(format!("{} IS NULL", self.c("_s_u", k)));
        format!(
            "{with}SELECT _s_c.t FROM (\
               SELECT {head_cols} FROM ({heads}) _s_hs JOIN {t} _s_a ON {aid} = _s_hs.h WHERE {ready} \
               UNION ALL \
               SELECT _s_v.i, _s_v.t FROM (SELECT {free_cols} FROM {t} _s_u WHERE {free} ORDER BY {uk}, {uid} LIMIT {unkeyed}) _s_v\
             ) _s_c ORDER BY _s_c.i",
            head_cols = cols("_s_a"),
            aid = self.c("_s_a", id),
            ready = join_and(self.ready_own("_s_a")),
            free_cols = cols("_s_u"),
            free = free.join(" AND "),
            uk = self.c("_s_u", k),
            uid = self.c("_s_u", id),
        )
    }
}
