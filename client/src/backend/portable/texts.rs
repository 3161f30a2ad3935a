//! Statement texts built once per queue and list length: an ack of 100 rows
//! lists 100 parameters, and formatting them on every call took a seventh of
//! the client's time in such an ack.

use super::sql::Ack;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The statements kept, each built for a list of ids of some length.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Text {
    /// an ack or drop (see [`Ack`])
    Ack(Ack),
    /// an advisory claim's try of its candidates' keys, a column each, after
    /// their read
    TryLocks,
    /// … its read of the rows still ready, once it holds their keys
    HeldReady,
    /// … its count of their attempts
    CountAttempt,
}

/// Beyond this many texts the cache starts again: list lengths are batch
/// sizes, a handful per queue in practice.
const KEPT: usize = 256;

#[derive(Default)]
pub(super) struct Texts(Mutex<HashMap<(Text, usize), Arc<str>>>);

impl Texts {
    /// The text of statement `t` for `n` ids, built by `build` the first time.
    pub(super) fn get(&self, t: Text, n: usize, build: impl FnOnce() -> String) -> Arc<str> {
        if let Some(s) = self.0.lock().unwrap().get(&(t, n)) {
            return s.clone();
        }
        let s: Arc<str> = build().into();
        let mut map = self.0.lock().unwrap();
        if map.len() >= KEPT {
            map.clear();
        }
        map.insert((t, n), s.clone());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_once_per_statement_and_length() {
        let texts = Texts::default();
        let mut built = 0;
        for _ in 0..3 {
            texts.get(Text::Ack(Ack::Held), 2, || {
                built += 1;
                "a2".into()
            });
        }
        let other = texts.get(Text::Ack(Ack::SharedToken), 2, || "s2".into());
        assert_eq!(built, 1);
        assert_eq!(
            &*texts.get(Text::Ack(Ack::Held), 2, || unreachable!()),
            "a2"
        );
        assert_eq!(&*other, "s2");
    }

    #[test]
    fn starts_again_past_the_bound() {
        let texts = Texts::default();
        for n in 0..=KEPT {
            texts.get(Text::Ack(Ack::Held), n, || n.to_string());
        }
        assert_eq!(texts.0.lock().unwrap().len(), 1);
        assert_eq!(
            &*texts.get(Text::Ack(Ack::Held), KEPT, || unreachable!()),
            "256"
        );
    }
}
