//! Payment card numbers, IBANs and IP addresses: numbers with a structure
//! to check (a Luhn digit, a mod-97 remainder, octets), which is what keeps
//! ids and amounts from being taken for them.

use crate::scan::{is_word, number_goes_on, run};

/// The end of the payment card number at `i`: 13 to 19 digits, together or
/// in groups of 3 to 6 split by one space, `-` or `.` (the same throughout), with
/// an issuer's first digits (2221-2720, 3, 4, 5, 6: Mastercard, Amex, Diners,
/// JCB, Visa, Discover, UnionPay, Maestro) and a valid Luhn check digit.
///
/// Other long numbers (a millisecond timestamp, `1700000000000`; an order id
/// of 20 digits) are left alone, as are 9 in 10 random numbers of the right
/// shape (the Luhn digit).
pub fn card(s: &[u8], i: usize) -> Option<usize> {
    if !(b'2'..=b'6').contains(&s[i]) {
        return None;
    }
    let mut digits = [0u8; 19];
    let mut n = 0;
    let first = run(s, i, 19, |b| b.is_ascii_digit());
    if first > 19 {
        return None;
    }
    let mut end = i + first;
    let sep = match s.get(end) {
        Some(&b) if matches!(b, b' ' | b'-' | b'.') && (3..=6).contains(&first) => b,
        _ => 0,
    };
    let mut group = (i, first);
    loop {
        let (start, len) = group;
        for &digit in &s[start..start + len] {
            digits[n] = digit - b'0';
            n += 1;
        }
        end = start + len;
        if sep == 0 || s.get(end) != Some(&sep) {
            break;
        }
        let next = run(s, end + 1, 6, |b| b.is_ascii_digit());
        if !(3..=6).contains(&next) || n + next > 19 {
            break;
        }
        group = (end + 1, next);
    }
    if !(13..=19).contains(&n) {
        return None;
    }
    let digits = &digits[..n];
    let issuer = match digits {
        [2, ..] => (2221..=2720).contains(&number(&digits[..4])),
        [3..=6, ..] => true,
        _ => false,
    };
    (issuer && luhn(digits) && !number_goes_on(s, end)).then_some(end)
}

fn number(digits: &[u8]) -> u32 {
    digits.iter().fold(0, |n, &d| n * 10 + u32::from(d))
}

/// Whether the last digit is the Luhn check digit of the others.
pub fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = (digits.iter().rev().enumerate())
        .map(|(k, &d)| {
            let d = u32::from(d);
            match k % 2 {
                0 => d,
                _ if d > 4 => d * 2 - 9,
                _ => d * 2,
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// IBAN lengths by country, from the SWIFT IBAN registry.
const IBAN_LENGTHS: &[(&[u8; 2], u8)] = &[
    (b"AD", 24),
    (b"AE", 23),
    (b"AL", 28),
    (b"AT", 20),
    (b"AZ", 28),
    (b"BA", 20),
    (b"BE", 16),
    (b"BG", 22),
    (b"BH", 22),
    (b"BI", 27),
    (b"BR", 29),
    (b"BY", 28),
    (b"CH", 21),
    (b"CR", 22),
    (b"CY", 28),
    (b"CZ", 24),
    (b"DE", 22),
    (b"DJ", 27),
    (b"DK", 18),
    (b"DO", 28),
    (b"EE", 20),
    (b"EG", 29),
    (b"ES", 24),
    (b"FI", 18),
    (b"FK", 18),
    (b"FO", 18),
    (b"FR", 27),
    (b"GB", 22),
    (b"GE", 22),
    (b"GI", 23),
    (b"GL", 18),
    (b"GR", 27),
    (b"GT", 28),
    (b"HR", 21),
    (b"HU", 28),
    (b"IE", 22),
    (b"IL", 23),
    (b"IQ", 23),
    (b"IS", 26),
    (b"IT", 27),
    (b"JO", 30),
    (b"KW", 30),
    (b"KZ", 20),
    (b"LB", 28),
    (b"LC", 32),
    (b"LI", 21),
    (b"LT", 20),
    (b"LU", 20),
    (b"LV", 21),
    (b"LY", 25),
    (b"MC", 27),
    (b"MD", 24),
    (b"ME", 22),
    (b"MK", 19),
    (b"MN", 20),
    (b"MR", 27),
    (b"MT", 31),
    (b"MU", 30),
    (b"NI", 28),
    (b"NL", 18),
    (b"NO", 15),
    (b"OM", 23),
    (b"PK", 24),
    (b"PL", 28),
    (b"PS", 29),
    (b"PT", 25),
    (b"QA", 29),
    (b"RO", 24),
    (b"RS", 22),
    (b"RU", 33),
    (b"SA", 24),
    (b"SC", 31),
    (b"SD", 18),
    (b"SE", 24),
    (b"SI", 19),
    (b"SK", 24),
    (b"SM", 27),
    (b"SO", 23),
    (b"ST", 25),
    (b"SV", 28),
    (b"TL", 23),
    (b"TN", 24),
    (b"TR", 26),
    (b"UA", 29),
    (b"VA", 22),
    (b"VG", 24),
    (b"XK", 20),
    (b"YE", 30),
];

/// The end of the IBAN at `i`: a country's code and length, check digits,
/// and the rest in groups of four split by one space (the printed form) or
/// not split at all, whose mod-97 remainder is 1. Upper or lower case, not
/// mixed.
pub fn iban(s: &[u8], i: usize) -> Option<usize> {
    let [a, b, c, d, ..] = *s.get(i..)? else {
        return None;
    };
    let case = a.is_ascii_uppercase();
    let letter = |x: u8| x.is_ascii_alphabetic() && x.is_ascii_uppercase() == case;
    if !(letter(a) && letter(b) && c.is_ascii_digit() && d.is_ascii_digit()) {
        return None;
    }
    let country = [a.to_ascii_uppercase(), b.to_ascii_uppercase()];
    let &(_, len) = IBAN_LENGTHS.iter().find(|(code, _)| **code == country)?;
    let len = usize::from(len);
    let mut chars = [0u8; 34];
    chars[..4].copy_from_slice(&[country[0], country[1], c, d]);
    let spaced = s.get(i + 4) == Some(&b' ');
    let mut j = i + 4;
    for (n, char) in chars.iter_mut().enumerate().take(len).skip(4) {
        if spaced && n % 4 == 0 {
            if s.get(j) != Some(&b' ') {
                return None;
            }
            j += 1;
        }
        let x = *s.get(j)?;
        if !(x.is_ascii_digit() || letter(x)) {
            return None;
        }
        *char = x.to_ascii_uppercase();
        j += 1;
    }
    (!s.get(j).copied().is_some_and(is_word) && mod97(&chars[..len]) == 1).then_some(j)
}

/// The IBAN's remainder: its first four characters moved to the end,
/// letters as 10 to 35.
fn mod97(chars: &[u8]) -> u32 {
    let (head, tail) = chars.split_at(4);
    tail.iter().chain(head).fold(0, |r, &x| {
        if x.is_ascii_digit() {
            (r * 10 + u32::from(x - b'0')) % 97
        } else {
            (r * 100 + u32::from(x - b'A') + 10) % 97
        }
    })
}

/// The end of the IPv4 address at `i`: four numbers 0 to 255 (no leading
/// zeros), not part of a longer dotted number (`1.2.3.4.5`, a version).
/// A port (`:8080`) or a prefix length (`/24`) may follow.
pub fn ipv4(s: &[u8], i: usize) -> Option<usize> {
    let end = ipv4_body(s, i)?;
    let goes_on = match s.get(end) {
        Some(&b) => {
            is_word(b) || b == b'@' || (b == b'.' && s.get(end + 1).is_some_and(u8::is_ascii_digit))
        }
        None => false,
    };
    (!goes_on).then_some(end)
}

/// The end of the four dotted octets at `i`.
fn ipv4_body(s: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    for octet in 0..4 {
        if octet > 0 {
            if s.get(j) != Some(&b'.') {
                return None;
            }
            j += 1;
        }
        let len = run(s, j, 3, |b| b.is_ascii_digit());
        if len == 0 || len > 3 || (len > 1 && s[j] == b'0') {
            return None;
        }
        let value = s[j..j + len]
            .iter()
            .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
        if value > 255 {
            return None;
        }
        j += len;
    }
    Some(j)
}

/// The end of the IPv6 address at `i`: eight groups of one to four hex
/// digits split by `:`, or fewer around one `::`, possibly ending in an
/// IPv4 address (`::ffff:192.0.2.1`).
///
/// So that times (`10:30:00`), MAC addresses, `std::vector` and slices
/// (`a[1::2]`) are left alone, a shortened address needs a decimal digit
/// and a group of three or four digits (`fe80::1`, `2001:db8::`), or is
/// `::1`.
pub fn ipv6(s: &[u8], i: usize) -> Option<usize> {
    let hex = |b: u8| b.is_ascii_hexdigit();
    if i > 0 && (is_word(s[i - 1]) || s[i - 1] == b':') {
        return None;
    }
    // Most words and numbers are not addresses: the first group is one to
    // four hex digits, then a `:`.
    let first = run(s, i, 4, hex);
    if first > 4 || s.get(i + first) != Some(&b':') {
        return None;
    }
    let mut j = i;
    let mut groups = 0;
    let mut shortened = false;
    let mut long_group = false;
    let mut decimal = false;
    if s[i..].starts_with(b"::") {
        shortened = true;
        j += 2;
    }
    loop {
        let len = run(s, j, 4, hex);
        if len == 0 {
            break;
        }
        if len > 4 {
            return None;
        }
        if s.get(j + len) == Some(&b'.') && (shortened || groups == 6) {
            j = ipv4_body(s, j)?;
            groups += 2;
            decimal = true;
            long_group = true;
            break;
        }
        groups += 1;
        decimal |= s[j..j + len].iter().any(u8::is_ascii_digit);
        long_group |= len >= 3;
        j += len;
        if groups > 8 {
            return None;
        }
        match (s.get(j), s.get(j + 1)) {
            (Some(b':'), Some(b':')) if shortened => return None,
            (Some(b':'), Some(b':')) => {
                shortened = true;
                j += 2;
            }
            (Some(b':'), Some(&next)) if hex(next) => j += 1,
            _ => break,
        }
    }
    let valid = if shortened {
        (1..=7).contains(&groups) && ((decimal && long_group) || &s[i..j] == b"::1")
    } else {
        groups == 8
    };
    let goes_on = s.get(j).is_some_and(|&b| {
        is_word(b) || b == b'@' || (b == b'.' && s.get(j + 1).is_some_and(u8::is_ascii_hexdigit))
    });
    (valid && !goes_on).then_some(j)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_start(text: &str, find: fn(&[u8], usize) -> Option<usize>) -> Option<&str> {
        find(text.as_bytes(), 0).map(|end| &text[..end])
    }

    #[test]
    fn luhn_digits() {
        assert!(luhn(&[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]));
        assert!(!luhn(&[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2]));
        assert!(luhn(&[7, 9, 9, 2, 7, 3, 9, 8, 7, 1, 3]));
    }

    #[test]
    fn cards() {
        for (text, card_number) in [
            ("4111 1111 1111 1111", "4111 1111 1111 1111"),
            ("4111-1111-1111-1111 exp 12/27", "4111-1111-1111-1111"),
            ("4111111111111111", "4111111111111111"),
            ("5555 5555 5555 4444", "5555 5555 5555 4444"),
            ("2223 0031 2200 3222", "2223 0031 2200 3222"),
            ("3782 822463 10005", "3782 822463 10005"),
            ("378282246310005.", "378282246310005"),
            ("6011 1111 1111 1117", "6011 1111 1111 1117"),
            ("4111 1111 1111 1111 2024", "4111 1111 1111 1111"),
            ("6200000000000005", "6200000000000005"),
        ] {
            assert_eq!(at_start(text, card), Some(card_number), "{text}");
        }
    }

    #[test]
    fn not_cards() {
        for text in [
            // Luhn fails.
            "4111 1111 1111 1112",
            "4111111111111121",
            // No issuer starts so.
            "1234 5678 9012 3452",
            "1700000000000",
            "9999 9999 9999 9995",
            "2000 0000 0000 0002",
            // Too long or too short, or not a card's grouping.
            "41111111111111110000",
            "411111111111",
            "4111 1111 1111 11 11",
            "4111 1111-1111 1111",
            "4111111111111111.5",
            "4111111111111111@x.com",
        ] {
            assert_eq!(at_start(text, card), None, "{text}");
        }
    }

    #[test]
    fn ibans() {
        for (text, account) in [
            ("DE89 3704 0044 0532 0130 00", "DE89 3704 0044 0532 0130 00"),
            ("DE89370400440532013000", "DE89370400440532013000"),
            (
                "GB82 WEST 1234 5698 7654 32.",
                "GB82 WEST 1234 5698 7654 32",
            ),
            ("gb82west12345698765432", "gb82west12345698765432"),
            (
                "FR14 2004 1010 0505 0001 3M02 606",
                "FR14 2004 1010 0505 0001 3M02 606",
            ),
            ("NO9386011117947", "NO9386011117947"),
            (
                "DE89 3704 0044 0532 0130 00 and more",
                "DE89 3704 0044 0532 0130 00",
            ),
        ] {
            assert_eq!(at_start(text, iban), Some(account), "{text}");
        }
    }

    #[test]
    fn not_ibans() {
        for text in [
            // mod 97 fails.
            "DE88 3704 0044 0532 0130 00",
            "DE89370400440532013001",
            // Unknown country, wrong length, mixed grouping or case.
            "ZZ89370400440532013000",
            "DE8937040044053201300",
            "DE893704004405320130001",
            "DE89 37040044 0532 0130 00",
            "Gb82WEST12345698765432",
            "GB82 west 1234 5698 7654 32",
            "DE12",
            "AB12 ",
        ] {
            assert_eq!(at_start(text, iban), None, "{text}");
        }
    }

    #[test]
    fn ipv4_addresses() {
        for (text, address) in [
            ("10.0.0.1", "10.0.0.1"),
            ("192.168.1.254:8080", "192.168.1.254"),
            ("10.0.0.0/8", "10.0.0.0"),
            ("255.255.255.255.", "255.255.255.255"),
            ("0.0.0.0", "0.0.0.0"),
        ] {
            assert_eq!(at_start(text, ipv4), Some(address), "{text}");
        }
        for text in [
            "1.2.3",
            "1.2.3.4.5",
            "256.1.1.1",
            "01.2.3.4",
            "1.2.3.4a",
            "1234.1.1.1",
            "10.0.0.1@x",
        ] {
            assert_eq!(at_start(text, ipv4), None, "{text}");
        }
    }

    #[test]
    fn ipv6_addresses() {
        for (text, address) in [
            (
                "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
                "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
            ),
            ("2001:db8::1", "2001:db8::1"),
            ("fe80::1ff:fe23:4567:890a,", "fe80::1ff:fe23:4567:890a"),
            ("::1", "::1"),
            ("::ffff:192.0.2.1", "::ffff:192.0.2.1"),
            ("2001:db8::", "2001:db8::"),
            ("2001:db8::1: here", "2001:db8::1"),
            ("64:ff9b::192.0.2.33", "64:ff9b::192.0.2.33"),
        ] {
            assert_eq!(at_start(text, ipv6), Some(address), "{text}");
        }
        for text in [
            "10:30:00",
            "00:1A:2B:3C:4D:5E",
            "dead::beef",
            "1::2",
            "::",
            "::2",
            "1::2::3",
            "12345::1",
            "2001:db8::1x",
            "1:2:3:4:5:6:7:8:9",
        ] {
            assert_eq!(at_start(text, ipv6), None, "{text}");
        }
    }
}
