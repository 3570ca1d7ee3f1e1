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
//!
//! A number written in groups and cut between two groups loses its
//! separator when its texts are trimmed (`4111 1111` | `1111 1111`): where
//! both sides of a boundary are digits and the groups on one side are split
//! by a space or `-`, the texts are also read with that separator between
//! them ([`grouped_across`]). Not `.`: a cut inside a group would make
//! an address of a version (`2.1` | `4.0` read as `2.1.4.0`).

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
            found.extend(grouped_across(&joined, boundaries, kinds));
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

/// The longest group of digits read back or on from a boundary: a card's
/// groups have at most 6, a phone number's 8.
const MAX_GROUP: usize = 8;

/// What `joined` holds across its `boundaries` when read with a separator
/// where a number written in groups was cut between two of them: the
/// findings that the separator is inside of, at positions of `joined`.
///
/// Nothing is copied unless a boundary has digits on both sides and a
/// separator to put there.
fn grouped_across(joined: &str, boundaries: &[usize], kinds: Kinds) -> Vec<Match> {
    let s = joined.as_bytes();
    let mut separators: Vec<(usize, u8)> = Vec::new();
    for &b in boundaries {
        if separators.last().is_some_and(|&(last, _)| last == b) {
            continue;
        }
        if let Some(separator) = separator_at(s, b) {
            separators.push((b, separator));
        }
    }
    if separators.is_empty() {
        return Vec::new();
    }
    let mut spaced = String::with_capacity(joined.len() + separators.len());
    // Where each separator is in `spaced`.
    let mut inserted = Vec::with_capacity(separators.len());
    let mut copied = 0;
    for &(b, separator) in &separators {
        spaced.push_str(&joined[copied..b]);
        inserted.push(spaced.len());
        spaced.push(char::from(separator));
        copied = b;
    }
    spaced.push_str(&joined[copied..]);
    let back = |at: usize| at - inserted.partition_point(|&i| i < at);
    (Scanner::new(&spaced, kinds))
        .filter(|m| {
            let next = inserted.partition_point(|&i| i < m.start);
            inserted.get(next).is_some_and(|&i| i < m.end)
        })
        .map(|m| Match {
            start: back(m.start),
            end: back(m.end),
            kind: m.kind,
        })
        .collect()
}

/// The separator to read at `b` of `s`, between a digit and a digit: the
/// one before the group of digits that ends at `b` (`4111 1111` | `1111`),
/// or else the one after the group that starts there (`4111` | `1111 1111`),
/// when it splits two groups.
fn separator_at(s: &[u8], b: usize) -> Option<u8> {
    let digit = |i: usize| s.get(i).is_some_and(u8::is_ascii_digit);
    // A separator at `i` between two digits.
    let separator = |i: usize| {
        let between = i > 0 && digit(i - 1) && digit(i + 1);
        Some(s[i]).filter(|c| between && matches!(c, b' ' | b'-'))
    };
    if b == 0 || !digit(b - 1) || !digit(b) {
        return None;
    }
    // The groups of digits that end and start at `b` (past MAX_GROUP, no
    // group: a long number is not written in groups).
    let before = (1..=MAX_GROUP + 1)
        .take_while(|&n| n <= b && digit(b - n))
        .count();
    let after = (0..=MAX_GROUP).take_while(|&n| digit(b + n)).count();
    if before <= MAX_GROUP
        && before < b
        && let Some(separator) = separator(b - before - 1)
    {
        return Some(separator);
    }
    (after <= MAX_GROUP && b + after < s.len())
        .then(|| separator(b + after))
        .flatten()
}
