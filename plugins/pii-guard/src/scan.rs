//! One pass over a text, finding what the guard looks for, left to right.
//!
//! Every detector starts where its kind can start (an `@`, a digit or a
//! letter that begins a word, a `+`, ...) and reads a bounded number of bytes
//! from there, so a text costs one pass plus small look-aheads, and nothing
//! is allocated. The detectors read bytes: everything they match is ASCII
//! (but for the Latin letters an email address may hold), so a match always
//! starts and ends on a character boundary of the text.

use serde::Deserialize;

use crate::{contact, numbers, secrets};

/// What the guard looks for; the names are the settings' and the recorded
/// changes'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Email,
    Phone,
    Card,
    Iban,
    Ip,
    Secret,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Email,
        Kind::Phone,
        Kind::Card,
        Kind::Iban,
        Kind::Ip,
        Kind::Secret,
    ];

    /// As the settings and the recorded changes name it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Email => "email",
            Kind::Phone => "phone",
            Kind::Card => "card",
            Kind::Iban => "iban",
            Kind::Ip => "ip",
            Kind::Secret => "secret",
        }
    }

    /// As the default placeholder names it: `[EMAIL]`.
    pub fn upper(self) -> &'static str {
        match self {
            Kind::Email => "EMAIL",
            Kind::Phone => "PHONE",
            Kind::Card => "CARD",
            Kind::Iban => "IBAN",
            Kind::Ip => "IP",
            Kind::Secret => "SECRET",
        }
    }

    /// As a deny reason names it.
    pub fn described(self) -> &'static str {
        match self {
            Kind::Email => "an email address",
            Kind::Phone => "a phone number",
            Kind::Card => "a payment card number",
            Kind::Iban => "an IBAN",
            Kind::Ip => "an IP address",
            Kind::Secret => "a secret key or token",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kinds(u8);

impl Kinds {
    pub const ALL: Kinds = Kinds(0b11_1111);

    pub fn has(self, kind: Kind) -> bool {
        self.0 & kind.bit() != 0
    }

    pub fn insert(&mut self, kind: Kind) {
        self.0 |= kind.bit();
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn union(self, other: Kinds) -> Kinds {
        Kinds(self.0 | other.0)
    }

    /// Whether every kind of `other` is in `self`.
    pub fn covers(self, other: Kinds) -> bool {
        self.0 & other.0 == other.0
    }

    /// The kinds, in [`Kind::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Kind> {
        Kind::ALL.into_iter().filter(move |&kind| self.has(kind))
    }
}

impl FromIterator<Kind> for Kinds {
    fn from_iter<I: IntoIterator<Item = Kind>>(kinds: I) -> Self {
        let mut set = Kinds::default();
        for kind in kinds {
            set.insert(kind);
        }
        set
    }
}

/// Something found: `text[start..end]` is of `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

/// Where the match of a kind starting at an index of the text ends, if one
/// does.
type Detector = fn(&[u8], usize) -> Option<usize>;

/// The matches of `kinds` in a text, in order and not overlapping.
pub struct Scanner<'a> {
    s: &'a [u8],
    kinds: Kinds,
    pos: usize,
    /// Where the last match ended: an email's local part, read backwards
    /// from its `@`, stops there.
    floor: usize,
    runs: secrets::Runs,
}

impl<'a> Scanner<'a> {
    pub fn new(text: &'a str, kinds: Kinds) -> Self {
        Scanner {
            s: text.as_bytes(),
            kinds,
            pos: 0,
            floor: 0,
            runs: secrets::Runs::default(),
        }
    }

    /// What `detect` finds of `kind` at `i`, when the policy looks for it.
    fn find(&self, i: usize, kind: Kind, detect: Detector) -> Option<Match> {
        if !self.kinds.has(kind) {
            return None;
        }
        Some(Match {
            start: i,
            end: detect(self.s, i)?,
            kind,
        })
    }

    /// The match starting with the word `s[i..end]` (letters, digits, `_`).
    ///
    /// Most words are words and most numbers amounts: what each detector
    /// needs of the word's first bytes, its length and the byte after it is
    /// checked here, so that a word costs a few comparisons.
    fn word(&self, i: usize, end: usize) -> Option<Match> {
        let s = self.s;
        let len = end - i;
        let after = s.get(end).copied().unwrap_or(0);
        let byte = |k: usize| s.get(i + k).copied().unwrap_or(0);
        let first = s[i];
        // What most words are: no token's first letter, no IBAN's check
        // digits, no `:` after.
        let token_letter = matches!(first, b'A' | b'g' | b's' | b'r' | b'x' | b'e');
        if first.is_ascii_alphabetic()
            && !token_letter
            && after != b':'
            && !(len >= 4 && byte(2).is_ascii_digit())
        {
            return None;
        }
        // One to four hex digits, then a `:`.
        let ipv6 = len <= 4 && after == b':' && first.is_ascii_hexdigit();
        let candidates: &[(bool, Kind, Detector)] = if first.is_ascii_digit() {
            if !number_start(s, i) {
                return None;
            }
            let grouped = (3..=6).contains(&len)
                && matches!(after, b' ' | b'-' | b'.')
                && (s.get(end + 1..end + 4)).is_some_and(|g| g.iter().all(u8::is_ascii_digit));
            let card = (b'2'..=b'6').contains(&first) && (len >= 13 || grouped);
            let ipv4 = len <= 3 && after == b'.';
            let phone = (first == b'0' || len == 3 || (len == 1 && first == b'1'))
                && matches!(after, b' ' | b'-' | b'.');
            &[
                (card, Kind::Card, numbers::card),
                (ipv4, Kind::Ip, numbers::ipv4),
                (phone, Kind::Phone, contact::phone),
                (ipv6, Kind::Ip, numbers::ipv6),
            ]
        } else {
            let token = token_letter
                && matches!(
                    (first, byte(1)),
                    (b'A', b'K' | b'S' | b'I')
                        | (b'g', b'h' | b'i')
                        | (b's' | b'r', b'k')
                        | (b'x', b'o')
                        | (b'e', b'y')
                );
            if token
                && self.kinds.has(Kind::Secret)
                && let Some(end) = secrets::token(s, i, &self.runs)
            {
                return Some(Match {
                    start: i,
                    end,
                    kind: Kind::Secret,
                });
            }
            let iban = len >= 4 && byte(2).is_ascii_digit() && byte(3).is_ascii_digit();
            if !(iban || ipv6) {
                return None;
            }
            &[
                (iban, Kind::Iban, numbers::iban),
                (ipv6, Kind::Ip, numbers::ipv6),
            ]
        };
        (candidates.iter())
            .filter(|&&(possible, ..)| possible)
            .find_map(|&(_, kind, detect)| self.find(i, kind, detect))
    }

    /// The match starting at (or, for an email, around) the mark at `i`.
    fn mark(&self, i: usize) -> Option<Match> {
        let s = self.s;
        match s[i] {
            b'@' if self.kinds.has(Kind::Email) => {
                let (start, end) = contact::email(s, i, self.floor)?;
                Some(Match {
                    start,
                    end,
                    kind: Kind::Email,
                })
            }
            b'+' | b'(' if word_start(s, i) => self.find(i, Kind::Phone, contact::phone),
            b':' if word_start(s, i) && s.get(i + 1) == Some(&b':') => {
                self.find(i, Kind::Ip, numbers::ipv6)
            }
            b'-' if s[i..].starts_with(b"-----BEGIN ") => {
                self.find(i, Kind::Secret, secrets::private_key)
            }
            _ => None,
        }
    }
}

impl Iterator for Scanner<'_> {
    type Item = Match;

    fn next(&mut self) -> Option<Match> {
        let s = self.s;
        let mut i = self.pos;
        // Whether a word at `i` would go on one begun before: only where the
        // last match ended, as the loop reads every word to its end.
        let mut inside = s.get(i).is_some_and(|&b| is_word(b)) && !word_start(s, i);
        while i < s.len() {
            let found = match CLASS[usize::from(s[i])] {
                WORD => {
                    // Nothing starts inside a word: it is read to its end at once.
                    let start = i;
                    let rest = &s[i + 1..];
                    i += 1
                        + (rest.iter())
                            .position(|&b| CLASS[usize::from(b)] != WORD)
                            .unwrap_or(rest.len());
                    if std::mem::take(&mut inside) {
                        continue;
                    }
                    self.word(start, i)
                }
                MARK => {
                    i += 1;
                    self.mark(i - 1)
                }
                _ => {
                    i += 1;
                    continue;
                }
            };
            if let Some(found) = found {
                self.pos = found.end;
                self.floor = found.end;
                return Some(found);
            }
        }
        self.pos = i;
        None
    }
}

const OTHER: u8 = 0;
/// A letter, a digit or `_`.
const WORD: u8 = 1;
/// What else a match may start with (an email: be around).
const MARK: u8 = 2;

/// Each byte's class, looked up once per byte of the text.
const CLASS: [u8; 256] = {
    let mut class = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        if is_word(byte) {
            class[b] = WORD;
        } else if matches!(byte, b'@' | b'+' | b'(' | b':' | b'-') {
            class[b] = MARK;
        }
        b += 1;
    }
    class
};

/// Whether a word (`_` included) goes on with `b`.
pub const fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether byte `i` begins a word: nothing of a word before it.
pub fn word_start(s: &[u8], i: usize) -> bool {
    i == 0 || !is_word(s[i - 1])
}

/// Whether a number can begin at `i`: not inside a word, and not the next
/// part of a number already begun (`1.2.3.4.5` has no address at `2`; the
/// end of `2024-01-15` is no phone number).
pub fn number_start(s: &[u8], i: usize) -> bool {
    if i == 0 {
        return true;
    }
    let before = s[i - 1];
    let joined = matches!(before, b'.' | b',' | b'-' | b':' | b'/' | b'+')
        && i >= 2
        && s[i - 2].is_ascii_digit();
    !(is_word(before) || joined)
}

/// Whether a number that would end at `end` goes on instead: a word
/// character, an `@` (it is an email's local part), or a separator followed
/// by a digit (`4111 1111 1111 1111` is a card, `1.2.3.4.5` no address).
pub fn number_goes_on(s: &[u8], end: usize) -> bool {
    let Some(&next) = s.get(end) else {
        return false;
    };
    is_word(next)
        || next == b'@'
        || (matches!(next, b'.' | b',' | b'-' | b':' | b'/')
            && s.get(end + 1).is_some_and(u8::is_ascii_digit))
}

/// The length of the run of bytes of `class` at `i`, counting at most
/// `limit + 1` (so a run longer than `limit` is told apart without reading
/// all of it).
pub fn run(s: &[u8], i: usize, limit: usize, class: impl Fn(u8) -> bool) -> usize {
    let rest = s.get(i..).unwrap_or_default();
    (rest.iter().take(limit + 1))
        .position(|&b| !class(b))
        .unwrap_or(rest.len().min(limit + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn found(text: &str) -> Vec<(Kind, &str)> {
        Scanner::new(text, Kinds::ALL)
            .map(|m| (m.kind, &text[m.start..m.end]))
            .collect()
    }

    #[test]
    fn kinds_filter() {
        let text = "a@b.co 10.0.0.1";
        let only_ip = Kinds::from_iter([Kind::Ip]);
        let kinds: Vec<Kind> = Scanner::new(text, only_ip).map(|m| m.kind).collect();
        assert_eq!(kinds, [Kind::Ip]);
        assert_eq!(Scanner::new(text, Kinds::default()).count(), 0);
        assert!(Kinds::ALL.covers(only_ip));
        assert!(!only_ip.covers(Kinds::ALL));
        assert_eq!(Kinds::ALL.iter().count(), 6);
    }

    #[test]
    fn matches_in_order() {
        assert_eq!(
            found("mail a@example.com, call +44 20 7946 0958, host 10.1.2.3"),
            [
                (Kind::Email, "a@example.com"),
                (Kind::Phone, "+44 20 7946 0958"),
                (Kind::Ip, "10.1.2.3"),
            ]
        );
    }

    #[test]
    fn run_counts_at_most_one_past_the_limit() {
        let digits = |b: u8| b.is_ascii_digit();
        assert_eq!(run(b"123a", 0, 10, digits), 3);
        assert_eq!(run(b"12345", 0, 3, digits), 4);
        assert_eq!(run(b"123", 0, 3, digits), 3);
        assert_eq!(run(b"123", 5, 3, digits), 0);
    }
}
