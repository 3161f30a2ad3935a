//! What a handler settles a delivery with, and what settling wrote (docs/semantics.md, "Outcomes").

use crate::error::{Error, Result};
use std::time::Duration;

/// The outcome a handler settles a delivery with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done: the row leaves the queue (DELETE, or processed_at = now()).
    Ack,
    /// Poison: settled exactly like ack.
    Drop,
    /// Deliver again (as soon as possible).
    Retry,
    /// Deliver again, not before this delay.
    RetryAfter(Duration),
    /// A registered custom outcome: its SQL runs instead of the dialect's statement.
    Custom(String),
}

impl Outcome {
    /// The outcome as the extension's `queue_complete` names it.
    pub(crate) fn sql_name(&self) -> String {
        match self {
            Outcome::Ack => "ack".into(),
            Outcome::Drop => "drop".into(),
            Outcome::Retry => "retry".into(),
            Outcome::RetryAfter(_) => "retry_after".into(),
            Outcome::Custom(n) => format!("custom:{n}"),
        }
    }

    /// The delay of a retry_after, in microseconds.
    pub(crate) fn delay_micros(&self) -> Option<i64> {
        match self {
            Outcome::RetryAfter(d) => Some(micros(*d)),
            _ => None,
        }
    }
}

/// A duration in microseconds, as the SQL of both backends binds it.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// What settling wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Settled {
    /// the row was deleted (ack, drop)
    Deleted,
    /// processed_at was set (ack, drop on a table with processed_at)
    Marked,
    /// it will be delivered again
    Retried,
    /// it will be delivered again after its retry_after
    Delayed,
    /// max_attempts reached: moved to the dead letter
    DeadLettered,
    /// given back without an outcome (nothing written but the lease / lock)
    Released,
    /// a custom outcome ran
    Custom,
}

impl Settled {
    /// The extension's result word (`queue_complete`, `queue_complete_many`).
    /// A word this client does not know means it and the extension disagree
    /// about the contract: an error, never a guess.
    pub(crate) fn parse(s: &str) -> Result<Settled> {
        Ok(match s {
            "deleted" => Settled::Deleted,
            "marked" => Settled::Marked,
            "retried" => Settled::Retried,
            "delayed" => Settled::Delayed,
            "dead_lettered" => Settled::DeadLettered,
            "released" => Settled::Released,
            "custom" => Settled::Custom,
            other => return Err(Error::unexpected_result(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_result_word_of_the_extension_parses_and_others_do_not() {
        for (w, s) in [
            ("deleted", Settled::Deleted),
            ("marked", Settled::Marked),
            ("retried", Settled::Retried),
            ("delayed", Settled::Delayed),
            ("dead_lettered", Settled::DeadLettered),
            ("released", Settled::Released),
            ("custom", Settled::Custom),
        ] {
            assert_eq!(Settled::parse(w).unwrap(), s);
        }
        for w in ["", "Deleted", "lease_lost", "not_held", "held"] {
            assert!(matches!(Settled::parse(w), Err(Error::Database(_))), "{w}");
        }
    }
}
