//! Claims that find a keyed queue's heads by walking its keys.
//!
//! A claim in id order reads every row waiting behind a taken head before the
//! free heads after them (docs/semantics.md, "How far a keyed claim reads"):
//! with few keys, and their heads taken, it reads the whole backlog. With few
//! keys it is cheaper to visit each key once in the `(ordering_key, id)`
//! index — a recursive skip from one key to the next — and take its first
//! row, the only one of the key that can be ready. These statements do that;
//! `ops::claim` chooses them while the queue has few keys (`keys`).

use super::*;

/// A key walk steps with `>`, written as `OPERATOR(pg_catalog.>)`: only for
/// keys whose equality is pg_catalog's, whose `>` is there too.
const KEY_EQ: &str = EQ;

impl Shape {
    /// This queue's claims can walk its keys: an ordering key compared with
    /// pg_catalog's operators, claims in id order (no priority), no group
    /// (its key index spans every queue of the table), a plain heap table
    /// (candidates by ctid) on one node.
    pub fn walks_keys(&self) -> bool {
        matches!(&self.ordering_key, Some((_, eq)) if eq == KEY_EQ)
            && self.priority.is_none()
            && self.group.is_none()
            && self.plain_heap
            && !self.distributed
    }

    /// The walk over this queue's distinct keys, as a subquery `_s_ks(v)`,
    /// at most `$1` of them with `limited`.
    fn key_walk(&self, limited: bool) -> String {
        let (k, _) = self.ordering_key.as_ref().expect("a keyed queue");
        let t = &self.table;
        let mine = |a: &str| {
            self.mine(a)
                .into_iter()
                .map(|c| format!("{c} AND "))
                .collect::<String>()
        };
        format!(
            "(WITH RECURSIVE _s_k(v) AS (\
               (SELECT _s_a.{k} FROM {t} _s_a WHERE {m}_s_a.{k} IS NOT NULL ORDER BY _s_a.{k} LIMIT 1) \
               UNION ALL \
               SELECT (SELECT _s_a.{k} FROM {t} _s_a WHERE {m}_s_a.{k} {GT} _s_k.v ORDER BY _s_a.{k} LIMIT 1) \
               FROM _s_k WHERE _s_k.v IS NOT NULL) \
             SELECT _s_k.v FROM _s_k WHERE _s_k.v IS NOT NULL{lim}) _s_ks",
            m = mine("_s_a"),
            lim = if limited { " LIMIT $1" } else { "" },
        )
    }

    /// How many keys the queue has, counted up to `$1` (int8).
    pub fn key_count(&self) -> String {
        format!("SELECT pg_catalog.count(*) FROM {}", self.key_walk(true))
    }

    /// The ctids of each key's first row if it is ready, as an array. The
    /// key is asked for as the range `k >= v AND k <= v`: with `k = v` the
    /// planner may read the id index from its start, testing each row's key
    /// (a key whose rows all lie far along then costs a scan of the table).
    fn heads(&self) -> String {
        let (k, _) = self.ordering_key.as_ref().expect("a keyed queue");
        let mut own = self.mine("_s_b");
        own.push(format!("_s_b.{k} {GE} _s_ks.v"));
        own.push(format!("_s_b.{k} {LE} _s_ks.v"));
        format!(
            "ARRAY(SELECT _s_h.c FROM {walk} CROSS JOIN LATERAL \
               (SELECT _s_b.ctid AS c, {ready} AS r FROM {t} _s_b WHERE {own} ORDER BY _s_b.{k}, _s_b.{id} LIMIT 1) _s_h \
             WHERE _s_h.r)",
            walk = self.key_walk(false),
            t = self.table,
            id = self.id,
            ready = join_and(self.ready_own("_s_b")),
            own = join_and(own),
        )
    }

    /// Ready rows without a key, from `a`, in id order (their range of the
    /// key index, NULLs last); with `after`, past the id in that parameter.
    fn unkeyed(&self, a: &str, cols: &str, after: Option<&str>) -> String {
        let (k, _) = self.ordering_key.as_ref().expect("a keyed queue");
        let mut ready = self.ready_own(a);
        ready.push(format!("{a}.{k} IS NULL"));
        if let Some(p) = after {
            ready.push(format!("{} {GT} {}", self.id_of(a), self.cast_id(p)));
        }
        format!(
            "SELECT {cols} FROM {t} {a} WHERE {ready} ORDER BY {a}.{k}, {}",
            self.id_of(a),
            t = self.table,
            ready = join_and(ready),
        )
    }

    /// A lease take over the heads: [`take`](Self::take)'s parameters ($1
    /// batch, $2 token) and columns. Past the rows other claims hold, it locks
    /// the first `$1` ready heads and the first `$1` ready rows without a key,
    /// and takes the first `$1` of both in id order; the others it locked are
    /// free again when its transaction ends.
    pub fn take_heads(&self, n: Option<u32>) -> String {
        let t = &self.table;
        let mut sets = vec![format!("{} = $2", self.locked_until.as_ref().unwrap())];
        sets.extend(self.attempt_plus_one("_s_t"));
        let update = format!(
            "UPDATE {t} _s_t SET {sets} WHERE _s_t.ctid {EQ} ANY (ARRAY(SELECT _s_p.c FROM (\
               SELECT _s_h.c, _s_h.i FROM (SELECT _s_c.ctid AS c, {cid} AS i FROM {t} _s_c \
                 WHERE _s_c.ctid {EQ} ANY ({heads}) AND {ready} ORDER BY {cid} {limit} FOR UPDATE OF _s_c SKIP LOCKED) _s_h \
               UNION ALL \
               SELECT _s_v.c, _s_v.i FROM ({unkeyed} {limit} FOR UPDATE OF _s_u SKIP LOCKED) _s_v\
             ) _s_p ORDER BY _s_p.i {limit}))",
            sets = sets.join(", "),
            cid = self.id_of("_s_c"),
            heads = self.heads(),
            ready = join_and(self.ready_own("_s_c")),
            unkeyed = self.unkeyed(
                "_s_u",
                &format!("_s_u.ctid AS c, {} AS i", self.id_of("_s_u")),
                None
            ),
            limit = limit(n),
        );
        self.taken_oldest_first(&update, self.locked_until.as_deref())
    }

    /// A row_lock claim over the heads: [`claim_row_lock`](Self::claim_row_lock)'s
    /// parameters ($1 batch, with `except` $2 the ids held) and columns.
    /// Its candidates, unlocked: the ready heads and the first `8 × $1 + 64`
    /// ready rows without a key (a row_lock claim keeps every lock it takes
    /// until its transaction ends, so it locks only the rows it takes).
    pub fn claim_row_lock_heads(&self, except: bool, n: Option<u32>) -> String {
        let mut ready = self.ready_own("_s_t");
        ready.insert(
            0,
            format!(
                "_s_t.ctid {EQ} ANY ({heads} {CAT} ARRAY({unkeyed} LIMIT $1 OPERATOR(pg_catalog.*) 8 {PLUS} 64))",
                heads = self.heads(),
                unkeyed = self.unkeyed("_s_u", "_s_u.ctid", None),
            ),
        );
        self.row_lock_select(&join_and(ready), except, n)
    }

    /// advisory candidates over the heads: [`advisory_candidates`](Self::advisory_candidates)'s
    /// parameters and columns, the ready heads and rows without a key in id
    /// order; after the first page (`Start::After`) past the id in $2.
    pub fn advisory_candidates_heads(&self, start: Start, n: Option<u32>) -> String {
        let id = self.id_of("_s_t");
        let after = (start == Start::After).then_some("$2");
        let mut ready = self.ready_own("_s_t");
        ready.insert(
            0,
            format!(
                "_s_t.ctid {EQ} ANY ({heads} {CAT} ARRAY({unkeyed} {limit}))",
                heads = self.heads(),
                unkeyed = self.unkeyed("_s_u", "_s_u.ctid", after),
                limit = limit(n),
            ),
        );
        if let Some(p) = after {
            ready.push(format!("{id} {GT} {}", self.cast_id(p)));
        }
        format!(
            "SELECT ({id})::pg_catalog.text, {key} FROM {t} _s_t WHERE {ready} ORDER BY {id} {limit}",
            key = self.advisory_key(&format!("({id})::pg_catalog.text")),
            t = self.table,
            ready = join_and(ready),
            limit = limit(n),
        )
    }
}
