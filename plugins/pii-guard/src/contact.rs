//! Email addresses and phone numbers.

use crate::scan::{number_goes_on, number_start};

/// The longest local part read back from an `@` (RFC 5321 allows 64 bytes;
/// longer ones are redacted from this many bytes before the `@`).
const MAX_LOCAL: usize = 256;
/// RFC 1035: a domain name is at most 253 bytes, a label 63.
const MAX_DOMAIN: usize = 253;
const MAX_LABEL: usize = 63;

/// The email address around the `@` at `at`: `(start, end)`. Its local part
/// is read backwards, not before `floor` (the end of the previous match).
///
/// Local parts hold ASCII letters, digits and `._%+-`, and Latin letters with
/// diacritics (`jörg@`); domains two or more labels of letters, digits and
/// `-`, the last one ASCII letters (`example.com`). Other scripts end an
/// address, so that `メールはuser@example.comまで` keeps its Japanese text.
pub fn email(s: &[u8], at: usize, floor: usize) -> Option<(usize, usize)> {
    let mut start = at;
    while start > floor && at - start < MAX_LOCAL {
        let before = s[start - 1];
        if before.is_ascii_alphanumeric() || matches!(before, b'.' | b'_' | b'%' | b'+' | b'-') {
            start -= 1;
        } else if let Some(len) = latin_letter_before(&s[floor..start]) {
            start -= len;
        } else {
            break;
        }
    }
    while start < at && s[start] == b'.' {
        start += 1;
    }
    if start == at || s[at - 1] == b'.' {
        return None;
    }
    let end = domain(s, at + 1)?;
    Some((start, end))
}

/// The end of the domain starting at `i`.
fn domain(s: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    let mut labels = 0;
    loop {
        let label_start = j;
        let mut ascii_letters = true;
        while j - i <= MAX_DOMAIN {
            match s.get(j) {
                Some(&b) if b.is_ascii_alphanumeric() || b == b'-' => {
                    ascii_letters &= b.is_ascii_alphabetic();
                    j += 1;
                }
                Some(_) => match latin_letter_at(&s[j..]) {
                    Some(len) => {
                        ascii_letters = false;
                        j += len;
                    }
                    None => break,
                },
                None => break,
            }
        }
        let label = &s[label_start..j];
        if label.is_empty()
            || label.len() > MAX_LABEL
            || label.starts_with(b"-")
            || label.ends_with(b"-")
        {
            return None;
        }
        labels += 1;
        let more = s.get(j) == Some(&b'.')
            && (s.get(j + 1).is_some_and(u8::is_ascii_alphanumeric)
                || latin_letter_at(&s[j + 1..]).is_some());
        if more && j - i < MAX_DOMAIN {
            j += 1;
            continue;
        }
        // The last label is the top-level domain: two or more ASCII letters.
        let tld = ascii_letters && label.len() >= 2;
        return (labels >= 2 && tld && !s.get(j).is_some_and(|&b| b == b'_' || b == b'@'))
            .then_some(j);
    }
}

/// The length of the Latin letter with a diacritic (U+00C0 to U+024F, but
/// `×` and `÷`) that `s` begins with.
fn latin_letter_at(s: &[u8]) -> Option<usize> {
    // These letters take two bytes: a lead byte 0xC3 to 0xC9.
    match s {
        [lead @ 0xC3..=0xC9, next, ..] if (0x80..0xC0).contains(next) => {
            let code = (u32::from(lead & 0x1F) << 6) | u32::from(next & 0x3F);
            (code >= 0xC0 && code != 0xD7 && code != 0xF7).then_some(2)
        }
        _ => None,
    }
}

/// The length of the Latin letter with a diacritic that `s` ends with.
fn latin_letter_before(s: &[u8]) -> Option<usize> {
    let [.., lead, next] = s else {
        return None;
    };
    latin_letter_at(&[*lead, *next])
}

/// The most digits a phone number has (E.164: 15, with `00` before them).
const MAX_DIGITS: u32 = 17;
const MAX_GROUPS: usize = 8;

/// The groups of digits of a phone number as written: `(030) 1234-567`.
#[derive(Debug, Default)]
struct Groups {
    end: usize,
    digits: u32,
    count: usize,
    lens: [u8; MAX_GROUPS],
    /// The separator before each group but the first (`(`, `)` and the
    /// spaces around them are 0).
    seps: [u8; MAX_GROUPS],
    /// The first group is in parentheses: `(555) 123-4567`.
    parenthesized: bool,
    /// Its first digits.
    first: [u8; 3],
}

impl Groups {
    /// Whether the groups are split by one separator throughout.
    fn uniform(&self) -> bool {
        let seps = &self.seps[1..self.count];
        seps.iter().all(|&sep| sep == seps[0])
    }

    fn lens(&self) -> &[u8] {
        &self.lens[..self.count]
    }
}

/// Reads groups of digits separated by one space, `-` or `.`, or written in
/// parentheses (`(0)`, `(555) `), from `i`. `None` for a number too long to
/// be a phone number's.
fn groups(s: &[u8], i: usize) -> Option<Groups> {
    let mut g = Groups::default();
    let mut j = i;
    let mut sep = 0;
    loop {
        let open = s.get(j) == Some(&b'(');
        let start = j + usize::from(open);
        let len = s[start..].iter().take_while(|b| b.is_ascii_digit()).count();
        let close = start + len;
        if len == 0 || (open && s.get(close) != Some(&b')')) {
            break;
        }
        if g.count == MAX_GROUPS {
            return None;
        }
        for &digit in &s[start..close] {
            if let Some(first) = g.first.get_mut(g.digits as usize) {
                *first = digit;
            }
            g.digits += 1;
        }
        if g.digits > MAX_DIGITS {
            return None;
        }
        g.parenthesized |= open && g.count == 0;
        g.lens[g.count] = len as u8;
        g.seps[g.count] = sep;
        g.count += 1;
        g.end = close + usize::from(open);
        j = g.end;
        // What joins this group to the next: a separator before a digit, or
        // before an opening parenthesis; after a closing one, at most a space
        // or a `-`.
        let next = |k: usize| s.get(k).is_some_and(|b| b.is_ascii_digit() || *b == b'(');
        sep = match s.get(j) {
            Some(&b) if matches!(b, b' ' | b'-' | b'.') && next(j + 1) => {
                j += 1;
                if s[j] == b'(' { 0 } else { b }
            }
            Some(b'(') => 0,
            Some(b) if open && b.is_ascii_digit() => 0,
            _ => break,
        };
    }
    (g.count > 0).then_some(g)
}

/// The end of the phone number starting at `i` (a `+`, a digit or a `(`).
///
/// - International: `+` and a country code, 8 to 15 digits in groups
///   (`+44 20 7946 0958`, `+1 (555) 123-4567`), or 10 to 15 in one
///   (`+4915112345678`).
/// - North American: `(555) 123-4567`, `555-123-4567`, `1-800-555-1234`,
///   one separator throughout, an area code not starting with 0 or 1.
/// - With a trunk prefix, as most countries write them at home: `0` and 10
///   to 12 digits in two or more groups of two or more, one separator
///   throughout (`020 7946 0958`, `06 12 34 56 78`, `(030) 1234567`), or
///   `00` and a country code (`0049 30 1234567`).
///
/// Numbers without separators are not phone numbers here (they are ids as
/// often), nor are dates (`2024-01-15`: 8 digits), prices or times.
pub fn phone(s: &[u8], i: usize) -> Option<usize> {
    let international = s[i] == b'+';
    let at = i + usize::from(international);
    if international && !s.get(at).is_some_and(|b| (b'1'..=b'9').contains(b)) {
        return None;
    }
    // Nor right after a number and a space: the groups of a longer number
    // (an IBAN whose check digits are wrong) are not a phone number.
    let after_number = i >= 2 && s[i - 1] == b' ' && s[i - 2].is_ascii_digit();
    if !international && s[i].is_ascii_digit() && (!number_start(s, i) || after_number) {
        return None;
    }
    // Most numbers are not phone numbers: at home, one begins with a trunk
    // `0`, three digits or a `1`, then a separator.
    if s[i].is_ascii_digit() {
        let first = s[i..]
            .iter()
            .take(5)
            .take_while(|b| b.is_ascii_digit())
            .count();
        let plausible = s[i] == b'0' || first == 3 || (first == 1 && s[i] == b'1');
        if !plausible || !matches!(s.get(i + first), Some(b' ' | b'-' | b'.')) {
            return None;
        }
    }
    let g = groups(s, at)?;
    if number_goes_on(s, g.end) {
        return None;
    }
    let valid = if international {
        let least = if g.count == 1 { 10 } else { 8 };
        (least..=15).contains(&g.digits)
    } else {
        north_american(&g) || trunk(&g)
    };
    valid.then_some(g.end)
}

fn north_american(g: &Groups) -> bool {
    let area = |digit: u8| (b'2'..=b'9').contains(&digit);
    match g.lens() {
        [3, 3, 4] if g.parenthesized => area(g.first[0]) && g.seps[2] != 0,
        [3, 3, 4] => area(g.first[0]) && g.seps[1] != 0 && g.uniform(),
        [1, 3, 3, 4] => g.first[0] == b'1' && area(g.first[1]) && g.seps[1] != 0 && g.uniform(),
        _ => false,
    }
}

fn trunk(g: &Groups) -> bool {
    let separated = g.count >= 2
        && g.lens().iter().all(|&len| len >= 2)
        && (g.parenthesized || (g.seps[1] != 0 && g.uniform()));
    match g.first {
        _ if !separated => false,
        [b'0', b'0', code] => (b'1'..=b'9').contains(&code) && (11..=17).contains(&g.digits),
        [b'0', _, _] => (10..=12).contains(&g.digits),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emails(text: &str) -> Vec<&str> {
        let s = text.as_bytes();
        let mut found = Vec::new();
        let mut floor = 0;
        for (at, _) in text.match_indices('@') {
            if at < floor {
                continue;
            }
            if let Some((start, end)) = email(s, at, floor) {
                found.push(&text[start..end]);
                floor = end;
            }
        }
        found
    }

    #[test]
    fn email_addresses() {
        assert_eq!(
            emails("write to jane.doe+tag@mail.example.co.uk."),
            ["jane.doe+tag@mail.example.co.uk"]
        );
        assert_eq!(emails("<a_b-c%d@x-y.io>"), ["a_b-c%d@x-y.io"]);
        assert_eq!(emails("jörg.müller@bücher.de"), ["jörg.müller@bücher.de"]);
        assert_eq!(emails("メールはuser@example.comまで"), ["user@example.com"]);
        assert_eq!(emails("mailto:x@y.org?subject=hi"), ["x@y.org"]);
        assert_eq!(emails("宛先はa@b.com。"), ["a@b.com"]);
        assert_eq!(emails("宛先はa@b.com.まで"), ["a@b.com"]);
        assert_eq!(emails(".lead@x.com"), ["lead@x.com"]);
    }

    #[test]
    fn not_email_addresses() {
        for text in [
            "@handle",
            "user@localhost",
            "a@b",
            "trailing.@x.com",
            "x@-bad.com",
            "x@bad-.com",
            "price@5.00",
            "x@y.c",
            "x@y.123",
            "decorator @property",
            "x@@y.com",
            "é@x.fr".trim_start_matches('é'),
        ] {
            assert!(emails(text).is_empty(), "{text}: {:?}", emails(text));
        }
    }

    #[test]
    fn local_part_stops_at_the_floor() {
        let text = "AKIAX@x.com";
        assert_eq!(email(text.as_bytes(), 5, 5), None);
        assert_eq!(email(text.as_bytes(), 5, 2), Some((2, 11)));
    }

    fn phones(text: &str) -> Option<&str> {
        let s = text.as_bytes();
        let start = s
            .iter()
            .position(|b| b.is_ascii_digit() || *b == b'+' || *b == b'(')?;
        phone(s, start).map(|end| &text[start..end])
    }

    #[test]
    fn phone_numbers() {
        for (text, number) in [
            ("+44 20 7946 0958", "+44 20 7946 0958"),
            ("call +1 (555) 123-4567 now", "+1 (555) 123-4567"),
            ("+1-202-555-0143.", "+1-202-555-0143"),
            ("+4915112345678", "+4915112345678"),
            ("+33 1 23 45 67 89", "+33 1 23 45 67 89"),
            ("+44 (0)20 7946 0958", "+44 (0)20 7946 0958"),
            ("(555) 123-4567", "(555) 123-4567"),
            ("(555)123-4567", "(555)123-4567"),
            ("555-123-4567", "555-123-4567"),
            ("555.123.4567", "555.123.4567"),
            ("555 123 4567", "555 123 4567"),
            ("1-800-555-1234", "1-800-555-1234"),
            ("020 7946 0958", "020 7946 0958"),
            ("06 12 34 56 78", "06 12 34 56 78"),
            ("06.12.34.56.78", "06.12.34.56.78"),
            ("(030) 1234567", "(030) 1234567"),
            ("030 12345678", "030 12345678"),
            ("0151-1234-5678", "0151-1234-5678"),
            ("0049 30 1234567", "0049 30 1234567"),
            ("03-1234-5678", "03-1234-5678"),
        ] {
            assert_eq!(phones(text), Some(number), "{text}");
        }
    }

    #[test]
    fn not_phone_numbers() {
        for text in [
            "12345",
            "+123",
            "+0 123 456 789",
            "2024-01-15",
            "01.02.2024",
            "on 01.01.2024 10 people",
            "10:30:00",
            "0612345678",
            "5551234567",
            "123-456-789",
            "155-123-4567",
            "555-123.4567",
            "1 234 567",
            "12 345 678 901",
            "000-123-4567",
            "0 12 34 56 78 9",
            "06 12 34 56 78 90 12 34",
            "order 2024-000123",
            "555-123-4567-89",
            "555-123-4567@x.com",
            "+1 555 123 4567 890 12",
            "3.14159 2.71828",
        ] {
            assert_eq!(phones(text), None, "{text}");
        }
    }
}
