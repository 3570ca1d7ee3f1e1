//! What both batch APIs (OpenAI's `/v1/batches`, Anthropic's `/v1/messages/batches`) do with
//! the requests of a batch being created: each body checked alike, each `custom_id` unique,
//! and the requests kept in groups that go to the store together (never the whole batch in
//! memory).

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::store::NewLine;

/// Requests go into the store in groups of about this many bytes (or [`GROUP_LINES`] lines).
pub(super) const GROUP_BYTES: usize = 4 * 1024 * 1024;
const GROUP_LINES: usize = 1000;

/// Why a request's body was refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BodyFault {
    /// It asks for a stream: a batch's requests are answered whole.
    Streamed,
    /// Its text is over `max_body_bytes`.
    TooLarge,
}

/// A request's body as kept: its JSON text, unless it asks for a stream or is over `max_body`.
pub(super) fn body_text(body: Map<String, Value>, max_body: usize) -> Result<String, BodyFault> {
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(BodyFault::Streamed);
    }
    let text = Value::Object(body).to_string();
    if text.len() > max_body {
        return Err(BodyFault::TooLarge);
    }
    Ok(text)
}

/// Why a request was not kept.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// Its `custom_id` was an earlier request's.
    Duplicate,
    /// The batch has its most requests already.
    TooMany,
}

/// The requests kept so far, and those waiting to go to the store.
pub(super) struct Kept {
    /// The `custom_id`s so far, by a 128-bit digest: 100,000 of them in under 4 MB whatever
    /// their length.
    seen: HashSet<u128>,
    group: Vec<NewLine>,
    group_bytes: usize,
    count: u32,
    most: u32,
}

impl Kept {
    /// None kept yet, at most `most`.
    pub(super) fn new(most: u32) -> Kept {
        Kept {
            seen: HashSet::new(),
            group: Vec::new(),
            group_bytes: 0,
            count: 0,
            most,
        }
    }

    /// Requests kept so far.
    pub(super) fn count(&self) -> u32 {
        self.count
    }

    /// Keeps the next request, numbered in turn.
    pub(super) fn push(&mut self, custom_id: String, body: String) -> Result<(), Refused> {
        let digest = crate::encoding::sha256(custom_id.as_bytes());
        let mut first = [0u8; 16];
        first.copy_from_slice(&digest[..16]);
        if !self.seen.insert(u128::from_le_bytes(first)) {
            return Err(Refused::Duplicate);
        }
        if self.count >= self.most {
            return Err(Refused::TooMany);
        }
        self.group_bytes += body.len() + custom_id.len();
        self.group.push(NewLine {
            seq: self.count,
            custom_id,
            body,
        });
        self.count += 1;
        Ok(())
    }

    /// The requests waiting, once they are enough to go to the store together.
    pub(super) fn full_group(&mut self) -> Option<Vec<NewLine>> {
        if self.group.len() < GROUP_LINES && self.group_bytes < GROUP_BYTES {
            return None;
        }
        Some(self.rest())
    }

    /// Every request waiting.
    pub(super) fn rest(&mut self) -> Vec<NewLine> {
        self.group_bytes = 0;
        std::mem::take(&mut self.group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_bodies_checked_and_groups_bounded() {
        let mut kept = Kept::new(1500);
        kept.push("a".into(), "{}".into()).unwrap();
        assert_eq!(kept.push("a".into(), "{}".into()), Err(Refused::Duplicate));
        assert!(kept.full_group().is_none());
        for n in 1..GROUP_LINES {
            kept.push(format!("id-{n}"), "{}".into()).unwrap();
        }
        let group = kept.full_group().expect("a full group");
        assert_eq!(group.len(), GROUP_LINES);
        assert_eq!((group[0].seq, group[999].seq), (0, 999));
        for n in GROUP_LINES..1500 {
            kept.push(format!("id-{n}"), "{}".into()).unwrap();
        }
        assert_eq!(
            kept.push("one more".into(), "{}".into()),
            Err(Refused::TooMany)
        );
        assert_eq!(kept.rest().len(), 500);
        assert_eq!(kept.count(), 1500);

        let body = |text: &str| serde_json::from_str::<Map<String, Value>>(text).unwrap();
        assert_eq!(
            body_text(body(r#"{"stream":true}"#), 100),
            Err(BodyFault::Streamed)
        );
        assert_eq!(
            body_text(body(r#"{"x":"0123456789"}"#), 10),
            Err(BodyFault::TooLarge)
        );
        assert_eq!(
            body_text(body(r#"{"stream":false}"#), 100).as_deref(),
            Ok(r#"{"stream":false}"#)
        );
    }
}
