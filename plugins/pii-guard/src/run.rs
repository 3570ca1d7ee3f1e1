//! Texts that the model reads one after the other (a chat's parts and
//! messages), read as one, so that an address or a number cut between two
//! of them is found.
//!
//! Each text is scanned on its own, normalised ([`Normalized`]); then the
//! texts are joined with nothing between them and scanned again, keeping
//! only what a boundary cuts. Nothing between them, because a cut can fall
//! anywhere (`jane.doe@exa` | `mple.com`): a space would hide every cut
//! inside a word. Both scans, because joining can hide what one text holds
//! (`... 1111 1111` | `2 more` reads as a longer number). Findings that
//! overlap are one: `write to` | `a@b.com` reads `toa@b.com` across the
//! boundary, so `to` is replaced along with the address. Over-redacting a
//! word that touches an address at a boundary is the price of never
//! leaving a piece of one.

use std::ops::Range;

use crate::normalize::Normalized;
use crate::scan::{Kinds, Match, Scanner};

/// Texts read as one.
pub struct Run<'a> {
    texts: Vec<Normalized<'a>>,
    /// Where each text starts in the texts joined, and where the last ends.
    starts: Vec<usize>,
}

/// A placeholder to write over `range` of a text (of the original text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub range: Range<usize>,
    pub kind: crate::Kind,
}

impl<'a> Run<'a> {
    pub fn new(texts: impl IntoIterator<Item = &'a str>) -> Run<'a> {
        let texts: Vec<Normalized<'a>> = texts.into_iter().map(Normalized::new).collect();
        let mut starts = Vec::with_capacity(texts.len() + 1);
        let mut at = 0;
        starts.push(at);
        for text in &texts {
            at += text.as_str().len();
            starts.push(at);
        }
        Run { texts, starts }
    }

    /// Every kind found, and the findings, overlapping ones merged (the
    /// first one's kind), in order, at positions of the texts joined.
    pub fn scan(&self, kinds: Kinds) -> (Kinds, Vec<Match>) {
        let mut found: Vec<Match> = Vec::new();
        for (text, &start) in self.texts.iter().zip(&self.starts) {
            found.extend(Scanner::new(text.as_str(), kinds).map(|m| Match {
                start: start + m.start,
                end: start + m.end,
                kind: m.kind,
            }));
        }
        let texts = self.texts.iter().filter(|t| !t.as_str().is_empty()).count();
        if texts > 1 {
            let mut joined = String::with_capacity(self.starts[self.texts.len()]);
            joined.extend(self.texts.iter().map(Normalized::as_str));
            let boundaries = &self.starts[1..self.starts.len() - 1];
            let cut = |m: &Match| {
                let next = boundaries.partition_point(|&b| b <= m.start);
                boundaries.get(next).is_some_and(|&b| b < m.end)
            };
            found.extend(Scanner::new(&joined, kinds).filter(cut));
            found.sort_by_key(|m| (m.start, std::cmp::Reverse(m.end)));
        }
        let mut all = Kinds::default();
        let mut merged: Vec<Match> = Vec::with_capacity(found.len());
        for m in found {
            all.insert(m.kind);
            match merged.last_mut() {
                Some(last) if m.start < last.end => last.end = last.end.max(m.end),
                _ => merged.push(m),
            }
        }
        (all, merged)
    }

    /// What to write over each text (of the original texts) for `findings`
    /// (as [`Run::scan`] gives them): a placeholder over each piece of a
    /// finding in a text, in order.
    pub fn edits(&self, findings: &[Match]) -> Vec<Vec<Edit>> {
        let mut edits = vec![Vec::new(); self.texts.len()];
        for found in findings {
            let first = self.starts.partition_point(|&s| s <= found.start) - 1;
            let texts = (self.texts.iter().zip(self.starts.windows(2)))
                .zip(&mut edits)
                .skip(first);
            for ((text, bounds), edits) in texts {
                let (start, end) = (bounds[0], bounds[1]);
                if start >= found.end {
                    break;
                }
                let local = found.start.max(start) - start..found.end.min(end) - start;
                if !local.is_empty() {
                    edits.push(Edit {
                        range: text.original(local),
                        kind: found.kind,
                    });
                }
            }
        }
        edits
    }
}
