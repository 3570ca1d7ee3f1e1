//! The text the detectors read: NFKC, without invisible characters; and
//! where each of its bytes came from, so that a redaction replaces the
//! original characters and leaves the rest of the text as it was.
//!
//! NFKC folds what looks like what the detectors match into it: fullwidth
//! `＠` and digits, the small `﹫`, no-break and other spaces, ligatures.
//! Default-ignorable code points (zero-width spaces and joiners, soft
//! hyphens, bidirectional controls, variation selectors, tags) draw nothing,
//! so they are dropped: `exa\u{200B}mple.com` is read as `example.com`.

use std::borrow::Cow;
use std::ops::Range;

use unicode_normalization::char::canonical_combining_class;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

/// A text as the detectors read it.
pub struct Normalized<'a> {
    text: Cow<'a, str>,
    /// Where each piece of `text` starts, in order; empty when `text` is the
    /// original.
    map: Vec<Piece>,
}

/// A normalised text being written, and its map.
struct Builder<'a> {
    original: &'a str,
    text: String,
    map: Vec<Piece>,
}

impl Builder<'_> {
    /// Copies `original[range]`, which normalising leaves as it is.
    fn plain(&mut self, range: Range<usize>) {
        if !range.is_empty() {
            let at = self.text.len();
            self.text.push_str(&self.original[range.clone()]);
            self.piece(at, range, true);
        }
    }

    /// Writes `original[range]` normalised, without its ignorable characters.
    fn normalize(&mut self, range: Range<usize>) {
        let at = self.text.len();
        let chars = self.original[range.clone()]
            .chars()
            .filter(|&c| !ignorable(c));
        (self.text).extend(chars.nfkc().filter(|&c| !ignorable(c)));
        if self.text.len() > at {
            let same = self.text[at..] == self.original[range.clone()];
            self.piece(at, range, same);
        }
    }

    fn piece(&mut self, at: usize, range: Range<usize>, same: bool) {
        match self.map.last_mut() {
            // Unchanged text is one piece, however long.
            Some(last) if same && last.same && last.to == range.start => last.to = range.end,
            _ => self.map.push(Piece {
                at,
                from: range.start,
                to: range.end,
                same,
            }),
        }
    }
}

/// `text[at..]`, up to the next piece, came from `original[from..to]`.
#[derive(Debug, Clone, Copy)]
struct Piece {
    at: usize,
    from: usize,
    to: usize,
    /// Byte for byte the original: a position inside maps to one inside.
    /// Otherwise the piece is one character (and the marks it combined
    /// with) that normalising changed, and maps to it whole.
    same: bool,
}

impl<'a> Normalized<'a> {
    /// `original`, normalised. Nothing is copied when that changes nothing
    /// (any ASCII text, most others).
    pub fn new(original: &'a str) -> Normalized<'a> {
        if original.is_ascii() || !changed_by_normalizing(original) {
            return Normalized {
                text: Cow::Borrowed(original),
                map: Vec::new(),
            };
        }
        let mut out = Builder {
            original,
            text: String::with_capacity(original.len()),
            map: Vec::new(),
        };
        // Characters that normalising leaves as they are, one after the
        // other (`from`, where the last starts, `to`): copied as one piece,
        // but for the last when a mark after it makes a segment of it.
        let mut plain: Option<(usize, usize, usize)> = None;
        // Characters normalised together: a starter that normalising
        // changes, or one and the marks after it.
        let mut segment: Option<Range<usize>> = None;
        for (i, c) in original.char_indices() {
            let common = common(c);
            if !common && ignorable(c) {
                continue;
            }
            let end = i + c.len_utf8();
            let quick = match common {
                true => IsNormalized::Yes,
                false => is_nfkc_quick(std::iter::once(c)),
            };
            // A starter that never combines with the characters before it
            // (those are NFKC_QC=Maybe) starts a segment, so that `ｊ` or `４`
            // is a segment of its own, mapped to itself only. A segment cut
            // where normalising would have combined across it only reads a
            // little differently from NFKC (a rare Tibetan vowel sign),
            // which no detector matches anyway.
            let starts =
                common || (quick != IsNormalized::Maybe && canonical_combining_class(c) == 0);
            if !starts {
                segment = Some(match (segment.take(), plain.take()) {
                    (Some(segment), _) => segment.start..end,
                    (None, Some((from, last, _))) => {
                        out.plain(from..last);
                        last..end
                    }
                    (None, None) => i..end,
                });
                continue;
            }
            if let Some(segment) = segment.take() {
                out.normalize(segment);
            }
            match &mut plain {
                Some((_, last, to)) if quick == IsNormalized::Yes && *to == i => {
                    *last = i;
                    *to = end;
                }
                _ => {
                    if let Some((from, _, to)) = plain.take() {
                        out.plain(from..to);
                    }
                    match quick {
                        IsNormalized::Yes => plain = Some((i, i, end)),
                        _ => segment = Some(i..end),
                    }
                }
            }
        }
        if let Some(segment) = segment {
            out.normalize(segment);
        }
        if let Some((from, _, to)) = plain {
            out.plain(from..to);
        }
        Normalized {
            text: Cow::Owned(out.text),
            map: out.map,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The range of the original text that `self.as_str()[range]` came from
    /// (a non-empty range on character boundaries).
    pub fn original(&self, range: Range<usize>) -> Range<usize> {
        if self.map.is_empty() {
            return range;
        }
        let piece = |at: usize| self.map[self.map.partition_point(|p| p.at <= at).max(1) - 1];
        let first = piece(range.start);
        let last = piece(range.end - 1);
        let start = if first.same {
            first.from + (range.start - first.at)
        } else {
            first.from
        };
        let end = if last.same {
            last.from + (range.end - last.at)
        } else {
            last.to
        };
        start..end
    }
}

/// Whether normalising changes `text` (or may: NFKC_QC=Maybe, a mark that
/// could combine with the character before it), in one pass that looks up
/// nothing for [`common`] characters.
fn changed_by_normalizing(text: &str) -> bool {
    // The combining class of the character before, as UAX #15's quick check
    // keeps it: marks out of canonical order are reordered.
    let mut last_class = 0;
    for c in text.chars() {
        if common(c) {
            last_class = 0;
            continue;
        }
        if ignorable(c) {
            return true;
        }
        let class = canonical_combining_class(c);
        let reordered = class != 0 && last_class > class;
        if reordered || is_nfkc_quick(std::iter::once(c)) != IsNormalized::Yes {
            return true;
        }
        last_class = class;
    }
    false
}

/// Whether `c` is one of the characters most texts are made of that NFKC
/// leaves as they are and never combines with what comes before (NFKC_QC=Yes,
/// canonical combining class 0): ASCII, Latin-1 and basic Cyrillic letters,
/// CJK ideographs, kana, `、。ー` and Hangul syllables. They skip the tables' look-ups,
/// which cost more than the rest of the work on such a character.
fn common(c: char) -> bool {
    matches!(
        c,
        '\0'..='\u{7F}'
            | '\u{C0}'..='\u{FF}'
            | '\u{400}'..='\u{45F}'
            | '\u{3001}'..='\u{3002}'
            | '\u{3041}'..='\u{3096}'
            | '\u{30A1}'..='\u{30FA}'
            | '\u{30FC}'
            | '\u{4E00}'..='\u{9FFF}'
            | '\u{AC00}'..='\u{D7A3}'
    )
}

/// Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt):
/// characters that draw nothing unless a font supports them specially, so
/// that one inside an address or a number hides it from a plain reading.
pub fn ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> String {
        Normalized::new(text).as_str().to_owned()
    }

    #[test]
    fn folds_lookalikes_and_drops_invisible_characters() {
        for (text, read_as) in [
            ("jane＠example.com", "jane@example.com"),
            ("jane﹫example.com", "jane@example.com"),
            ("jane@exa\u{200B}mple.com", "jane@example.com"),
            ("jane@exam\u{AD}ple.com", "jane@example.com"),
            ("jane@example\u{2060}.\u{FEFF}com", "jane@example.com"),
            (
                "4111\u{A0}1111\u{202F}1111\u{2009}1111",
                "4111 1111 1111 1111",
            ),
            ("４１１１－１１１１", "4111-1111"),
            ("ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ", "jane@example.com"),
            ("e\u{301}cole", "école"),
            ("ﬁle", "file"),
        ] {
            assert_eq!(read(text), read_as, "{text:?}");
        }
    }

    #[test]
    fn common_characters_are_left_as_they_are_and_start_a_segment() {
        for c in ('\0'..=char::MAX).filter(|&c| common(c)) {
            assert_eq!(
                is_nfkc_quick(std::iter::once(c)),
                IsNormalized::Yes,
                "{c:?}"
            );
            assert_eq!(canonical_combining_class(c), 0, "{c:?}");
            assert!(!ignorable(c), "{c:?}");
        }
    }

    #[test]
    fn unchanged_text_is_not_copied() {
        for text in ["plain ascii", "Grüße, 日本語, 🙂", "école"] {
            let normalized = Normalized::new(text);
            assert!(matches!(normalized.text, Cow::Borrowed(_)), "{text}");
            assert_eq!(normalized.original(1..3), 1..3);
        }
    }

    #[test]
    fn ranges_map_back_to_the_original_characters() {
        let text = "mail ｊａｎｅ＠ex\u{200B}ample.com, ok ①";
        let normalized = Normalized::new(text);
        let read = normalized.as_str();
        assert_eq!(read, "mail jane@example.com, ok 1");
        let start = read.find("jane").unwrap();
        let end = read.find(", ok").unwrap();
        let original = normalized.original(start..end);
        assert_eq!(&text[original], "ｊａｎｅ＠ex\u{200B}ample.com");
        // Inside a run of unchanged text, byte for byte.
        assert_eq!(&text[normalized.original(0..4)], "mail");
        assert_eq!(&text[normalized.original(22..26)], " ok ");
        // A character folded into several maps to itself whole.
        let ligature = Normalized::new("ﬃx");
        assert_eq!(ligature.as_str(), "ffix");
        assert_eq!(ligature.original(1..2), 0..3);
        assert_eq!(ligature.original(3..4), 3..4);
    }
}
