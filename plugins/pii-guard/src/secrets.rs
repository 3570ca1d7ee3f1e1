//! Credentials with a recognisable shape: a vendor's prefix and its length
//! and alphabet, a PEM private key block, a JWT.

use std::cell::Cell;

use crate::scan::{is_word, run};

/// The longest token body read: longer runs are not keys (and a text of
/// repeated prefixes costs at most this much per prefix).
const MAX_BODY: usize = 255;

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// The characters of base64url, which most API keys are written in.
fn url64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// The runs of base64url characters that tokens were last read in.
///
/// `sk-` keys and JWTs are base64url, and so is a text of repeated `sk-` or
/// `eyJ-`: each of those would read the rest of the run again. Each `sk-` or
/// JWT part inside a run reads its end and its letters here instead, so that
/// a text costs one pass however many prefixes it repeats. A JWT reads three
/// runs; a fourth is room to spare.
#[derive(Default)]
pub struct Runs([Cell<Run>; 4]);

#[derive(Clone, Copy, Default)]
struct Run {
    start: usize,
    end: usize,
    /// Where its last digit, upper-case and lower-case letter are, plus one
    /// (0: none).
    last_digit: usize,
    last_upper: usize,
    last_lower: usize,
}

impl Run {
    /// Whether `s[j..self.end]` has a digit, an upper-case and a lower-case
    /// letter.
    fn mixed_from(&self, j: usize) -> bool {
        self.last_digit > j && self.last_upper > j && self.last_lower > j
    }
}

impl Runs {
    /// The run of base64url characters from `j` (empty when `s[j]` is not one).
    fn at(&self, s: &[u8], j: usize) -> Run {
        if let Some(run) = (self.0.iter())
            .map(Cell::get)
            .find(|run| run.start <= j && j < run.end)
        {
            return run;
        }
        let mut run = Run {
            start: j,
            end: j,
            ..Run::default()
        };
        while let Some(&b) = s.get(run.end) {
            if !url64(b) {
                break;
            }
            run.end += 1;
            match b {
                b'0'..=b'9' => run.last_digit = run.end,
                b'A'..=b'Z' => run.last_upper = run.end,
                b'a'..=b'z' => run.last_lower = run.end,
                _ => {}
            }
        }
        // The oldest run makes room.
        let oldest = (self.0.iter()).min_by_key(|cell| cell.get().end);
        if let Some(cell) = oldest {
            cell.set(run);
        }
        run
    }
}

/// The end of a body of `min..=max` bytes of `class` at `j`, not followed by
/// more of a word.
fn body(s: &[u8], j: usize, min: usize, max: usize, class: fn(u8) -> bool) -> Option<usize> {
    let len = run(s, j, max, class);
    let end = j + len;
    ((min..=max).contains(&len) && !s.get(end).copied().is_some_and(is_word)).then_some(end)
}

/// The end of the token starting at `i` (a letter beginning a word):
///
/// - AWS access key ids: `AKIA` or `ASIA` and 16 upper-case letters or digits;
/// - GitHub tokens: `ghp_`, `gho_`, `ghs_`, `ghu_`, `ghr_` and 30 or more
///   letters or digits, `github_pat_` and 22 or more;
/// - OpenAI and Anthropic keys: `sk-` (`sk-proj-`, `sk-ant-api03-`, ...) and
///   32 or more base64url characters mixing upper case, lower case and
///   digits (so that `sk-learn-compatible-estimators` is no key);
/// - Stripe secret and restricted keys: `sk_live_`, `rk_live_`, `sk_test_`,
///   `rk_test_` and 16 or more letters or digits;
/// - Slack tokens: `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-` and 10 or more
///   letters, digits or `-`, with a digit;
/// - Google API keys: `AIza` and 35 base64url characters;
/// - JWTs: three base64url parts split by dots, the first two JSON objects
///   (`eyJ`).
pub fn token(s: &[u8], i: usize, runs: &Runs) -> Option<usize> {
    let rest = &s[i..];
    let after = |prefix: &[u8]| rest.starts_with(prefix).then_some(i + prefix.len());
    match rest[0] {
        b'A' => {
            if let Some(j) = after(b"AKIA").or_else(|| after(b"ASIA")) {
                body(s, j, 16, 16, |b| {
                    b.is_ascii_uppercase() || b.is_ascii_digit()
                })
            } else {
                let j = after(b"AIza")?;
                body(s, j, 35, 35, url64).filter(|&end| s.get(end).is_none_or(|&b| b != b'-'))
            }
        }
        b'g' => {
            if let Some(j) = after(b"github_pat_") {
                return body(s, j, 22, MAX_BODY, |b| alnum(b) || b == b'_');
            }
            let kind = *rest.get(2)?;
            let j = after(b"gh").filter(|_| rest.get(3) == Some(&b'_'))?;
            if !matches!(kind, b'p' | b'o' | b's' | b'u' | b'r') {
                return None;
            }
            body(s, j + 2, 30, MAX_BODY, alnum)
        }
        b's' | b'r' => {
            let stripe = [b"sk_live_", b"rk_live_", b"sk_test_", b"rk_test_"];
            if let Some(j) = stripe.iter().find_map(|prefix| after(*prefix)) {
                return body(s, j, 16, MAX_BODY, alnum);
            }
            let j = after(b"sk-")?;
            let run = runs.at(s, j);
            ((32..=MAX_BODY).contains(&(run.end - j)) && run.mixed_from(j)).then_some(run.end)
        }
        b'x' => {
            let j = after(b"xox")?;
            if !matches!(s.get(j), Some(b'b' | b'p' | b'a' | b'r' | b's'))
                || s.get(j + 1) != Some(&b'-')
            {
                return None;
            }
            let end = body(s, j + 2, 10, MAX_BODY, |b| alnum(b) || b == b'-')?;
            s[j + 2..end].iter().any(u8::is_ascii_digit).then_some(end)
        }
        b'e' => jwt(s, i, runs),
        _ => None,
    }
}

/// The end of the JWT at `i`: `eyJ...` (a header), `.`, `eyJ...` (claims),
/// `.`, a signature of 16 or more characters.
fn jwt(s: &[u8], i: usize, runs: &Runs) -> Option<usize> {
    let part = |start: usize, min: usize, max: usize| {
        let end = runs.at(s, start).end;
        (min..=max).contains(&(end - start)).then_some(end)
    };
    let json = |start: usize| s.get(start..).is_some_and(|rest| rest.starts_with(b"eyJ"));
    if !json(i) {
        return None;
    }
    let header = part(i, 10, 2048)?;
    if s.get(header) != Some(&b'.') || !json(header + 1) {
        return None;
    }
    let claims = part(header + 1, 10, 16384)?;
    if s.get(claims) != Some(&b'.') {
        return None;
    }
    let end = part(claims + 1, 16, 2048)?;
    let more = s.get(end) == Some(&b'.') && s.get(end + 1).is_some_and(|&b| url64(b));
    (!more).then_some(end)
}

/// The end of the PEM private key block at `i` (its `-----BEGIN`): after its
/// `-----END ...-----` line, or the end of the text when it was cut off
/// (everything after the header is the key).
pub fn private_key(s: &[u8], i: usize) -> Option<usize> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const END: &[u8] = b"-----END ";
    if !s[i..].starts_with(BEGIN) {
        return None;
    }
    let label = |start: usize| {
        run(s, start, 40, |b| {
            b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' '
        })
    };
    let start = i + BEGIN.len();
    let len = label(start);
    let name = &s[start..start + len.min(40)];
    if len > 40 || !contains(name, b"PRIVATE KEY") || !s[start + len..].starts_with(b"-----") {
        return None;
    }
    let body = start + len + 5;
    let Some(at) = find(&s[body..], END) else {
        return Some(s.len());
    };
    let close = body + at + END.len();
    let close = close + label(close).min(40);
    Some(if s[close..].starts_with(b"-----") {
        close + 5
    } else {
        close
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_start(text: &str) -> Option<&str> {
        let s = text.as_bytes();
        let end = if s.first() == Some(&b'-') {
            private_key(s, 0)
        } else {
            token(s, 0, &Runs::default())
        };
        end.map(|end| &text[..end])
    }

    const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";

    #[test]
    fn tokens() {
        let openai = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0hIj3kLm6n";
        let anthropic = "sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0hIj3kLm6n-AbcdAA";
        let google = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q";
        for (text, key) in [
            ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
            ("ASIAY34FZKBOKMUTVV7A,", "ASIAY34FZKBOKMUTVV7A"),
            (
                "ghp_16C7e42F292c6912E7710c838347Ae178B4a end",
                "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123",
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123",
            ),
            (openai, openai),
            (anthropic, anthropic),
            (
                "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
                "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            ),
            (
                "rk_live_51H8abcdEFGHijkl0123",
                "rk_live_51H8abcdEFGHijkl0123",
            ),
            (
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            ),
            (google, google),
            (JWT, JWT),
        ] {
            assert_eq!(at_start(text), Some(key), "{text}");
        }
    }

    #[test]
    fn not_tokens() {
        for text in [
            "AKIAIOSFODNN7EXAMPL",
            "AKIAIOSFODNN7EXAMPLE1",
            "AKIAiosfodnn7example",
            "ghp_short",
            "ghx_16C7e42F292c6912E7710c838347Ae178B4a",
            "sk-learn-compatible-estimators-and-pipelines",
            "sk-Ab3dEf6hIj9kLm2n",
            "sk_live_short",
            "xoxb-abcdefghijkl",
            "xoxz-123456789012",
            "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6",
            "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7",
            "eyJhbGciOiJIUzI1NiJ9",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0",
            "eyJhbGciOiJIUzI1NiJ9.notjson.c2lnbmF0dXJlc2lnbmF0dXJl",
            "example",
        ] {
            assert_eq!(at_start(text), None, "{text}");
        }
    }

    #[test]
    fn private_keys() {
        let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM\n-----END RSA PRIVATE KEY-----";
        assert_eq!(at_start(&format!("{key}\nrest")), Some(key));
        let open = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(at_start(open), Some(open));
        let cut = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC";
        assert_eq!(at_start(cut), Some(cut));
        assert_eq!(
            at_start("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"),
            None
        );
        assert_eq!(at_start("-----BEGIN PUBLIC KEY-----"), None);
        assert_eq!(at_start("----- not a key"), None);
    }
}
