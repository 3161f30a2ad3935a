//! A claimed row as it arrived, parsed only when the handler asks.

use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use std::sync::OnceLock;

/// A claimed row as a backend hands it over, with what holds it (`H`: the
/// backend's own hold).
pub(crate) struct Claimed<H> {
    pub(crate) id: String,
    /// the 1-based number of this delivery
    pub(crate) attempt: u32,
    pub(crate) row: Row,
    pub(crate) hold: H,
}

impl<H> Claimed<H> {
    /// The same row with its hold wrapped.
    pub(crate) fn map<G>(self, f: impl FnOnce(H) -> G) -> Claimed<G> {
        Claimed {
            id: self.id,
            attempt: self.attempt,
            row: self.row,
            hold: f(self.hold),
        }
    }
}

/// The claimed row: the JSON text the backend sent, kept unparsed until the
/// handler asks, because parsing every row at the claim took most of the
/// client's CPU in a 100-row batch.
pub(crate) struct Row {
    data: RowData,
    /// the row parsed, on first `value()`
    parsed: OnceLock<serde_json::Value>,
}

enum RowData {
    /// the JSON text of the extension's jsonb (after its version byte): its
    /// JSON columns are JSON, so `payload` reads them straight into `T`
    Ext(Vec<u8>),
    /// the portable path's JSON text, where a JSON column may arrive as a
    /// string holding its JSON (SQLite, MariaDB): see [`Row::payload`]
    Portable(Vec<u8>),
    /// no row (a NULL from the database)
    Null,
}

/// The canonical layout's `payload` column, read straight from the row's text.
#[derive(serde::Deserialize)]
struct PayloadColumn<T> {
    payload: Option<T>,
}

impl Row {
    fn new(data: RowData) -> Row {
        Row {
            data,
            parsed: OnceLock::new(),
        }
    }

    /// The extension's row: its jsonb as JSON text, or NULL.
    pub(crate) fn ext(text: Option<Vec<u8>>) -> Row {
        Row::new(text.map_or(RowData::Null, RowData::Ext))
    }

    /// The portable path's row as JSON text.
    pub(crate) fn portable(text: Vec<u8>) -> Row {
        Row::new(RowData::Portable(text))
    }

    /// The whole row as JSON (parsed on the first call).
    pub(crate) fn value(&self) -> &serde_json::Value {
        self.parsed.get_or_init(|| match &self.data {
            RowData::Ext(t) | RowData::Portable(t) => {
                serde_json::from_slice(t).unwrap_or(serde_json::Value::Null)
            }
            RowData::Null => serde_json::Value::Null,
        })
    }

    /// The row deserialised into `T`.
    pub(crate) fn as_type<T: DeserializeOwned>(&self) -> Result<T> {
        match &self.data {
            RowData::Ext(t) | RowData::Portable(t) => {
                serde_json::from_slice(t).map_err(Error::Payload)
            }
            RowData::Null => serde_json::from_value(serde_json::Value::Null).map_err(Error::Payload),
        }
    }

    /// The row's `payload` column deserialised into `T`.
    pub(crate) fn payload<T: DeserializeOwned>(&self) -> Result<T> {
        if let RowData::Ext(t) = &self.data {
            // straight into T; if that fails (say a text column holding JSON),
            // the general path below decides, with its error
            if let Ok(col) = serde_json::from_slice::<PayloadColumn<T>>(t) {
                return match col.payload {
                    Some(p) => Ok(p),
                    None => serde_json::from_value(serde_json::Value::Null).map_err(Error::Payload),
                };
            }
        }
        let v = self
            .value()
            .get("payload")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        // databases that keep JSON as text (SQLite, MariaDB) hand it over as a string
        if let serde_json::Value::String(text) = &v {
            if let Ok(t) = serde_json::from_str::<T>(text) {
                return Ok(t);
            }
        }
        serde_json::from_value(v).map_err(Error::Payload)
    }
}
