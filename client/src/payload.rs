//! A claimed row's payload as it arrived, parsed only when the handler asks.

use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use std::sync::OnceLock;

/// A claimed row as a backend hands it over, with what holds it (`H`: the
/// backend's own hold).
pub(crate) struct Claimed<H> {
    pub(crate) id: String,
    /// the 1-based number of this delivery
    pub(crate) attempt: u32,
    pub(crate) payload: Payload,
    pub(crate) hold: H,
}

impl<H> Claimed<H> {
    /// The same row with its hold wrapped.
    pub(crate) fn map<G>(self, f: impl FnOnce(H) -> G) -> Claimed<G> {
        Claimed {
            id: self.id,
            attempt: self.attempt,
            payload: self.payload,
            hold: f(self.hold),
        }
    }
}

/// The payload (the payload column's value, or the whole row on a queue
/// without one), kept as the text the backend sent until the handler asks,
/// because parsing every row at the claim took most of the client's CPU in a
/// 100-row batch.
pub(crate) struct Payload {
    data: Data,
    /// the payload parsed, on first `value()`
    parsed: OnceLock<serde_json::Value>,
}

enum Data {
    /// JSON text: the extension's jsonb, a JSON column, a portable whole row
    Json(Vec<u8>),
    /// a text column's value, which may hold JSON (SQLite and MariaDB keep
    /// JSON as text)
    Text(String),
    /// SQL NULL
    Null,
}

impl Payload {
    fn new(data: Data) -> Payload {
        Payload {
            data,
            parsed: OnceLock::new(),
        }
    }

    /// JSON text, or NULL.
    pub(crate) fn json(text: Option<Vec<u8>>) -> Payload {
        Payload::new(text.map_or(Data::Null, Data::Json))
    }

    /// A text column's value, or NULL.
    pub(crate) fn text(text: Option<String>) -> Payload {
        Payload::new(text.map_or(Data::Null, Data::Text))
    }

    /// The payload as JSON (parsed on the first call): text that is not JSON
    /// is a JSON string.
    pub(crate) fn value(&self) -> &serde_json::Value {
        self.parsed.get_or_init(|| match &self.data {
            Data::Json(t) => serde_json::from_slice(t).unwrap_or(serde_json::Value::Null),
            Data::Text(s) => {
                serde_json::from_str(s).unwrap_or_else(|_| serde_json::Value::String(s.clone()))
            }
            Data::Null => serde_json::Value::Null,
        })
    }

    /// The payload deserialised into `T`. Text that holds JSON — a text
    /// column, or a JSON string the extension made of one — is read as that
    /// JSON when `T` does not take the string itself.
    pub(crate) fn as_type<T: DeserializeOwned>(&self) -> Result<T> {
        match &self.data {
            Data::Json(t) => {
                serde_json::from_slice::<T>(t).or_else(|e| {
                    match serde_json::from_slice::<String>(t) {
                        Ok(inner) => serde_json::from_str(&inner).map_err(|_| Error::Payload(e)),
                        Err(_) => Err(Error::Payload(e)),
                    }
                })
            }
            Data::Text(s) => serde_json::from_str::<T>(s).or_else(|e| {
                serde_json::from_value(serde_json::Value::String(s.clone()))
                    .map_err(|_| Error::Payload(e))
            }),
            Data::Null => serde_json::from_value(serde_json::Value::Null).map_err(Error::Payload),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Payload;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Job {
        n: i64,
    }

    #[test]
    fn json_and_text_payloads() {
        let json = Payload::json(Some(br#"{"n": 1}"#.to_vec()));
        assert_eq!(json.as_type::<Job>().unwrap(), Job { n: 1 });
        assert_eq!(json.value()["n"], 1);
        // a text column the extension handed over as a JSON string
        let quoted = Payload::json(Some(br#""{\"n\": 2}""#.to_vec()));
        assert_eq!(quoted.as_type::<Job>().unwrap(), Job { n: 2 });
        assert_eq!(quoted.as_type::<String>().unwrap(), r#"{"n": 2}"#);
        let text = Payload::text(Some(r#"{"n": 3}"#.into()));
        assert_eq!(text.as_type::<Job>().unwrap(), Job { n: 3 });
        let plain = Payload::text(Some("hello".into()));
        assert_eq!(plain.as_type::<String>().unwrap(), "hello");
        assert_eq!(plain.value(), "hello");
        assert!(plain.as_type::<Job>().is_err());
        let null = Payload::json(None);
        assert_eq!(null.as_type::<Option<Job>>().unwrap(), None);
        assert!(null.as_type::<Job>().is_err());
    }
}
