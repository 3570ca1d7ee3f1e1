//! Globs of names (tools, `SERVER__TOOL`): `*` matches any run of characters, every other
//! character itself. Names hold no other metacharacters worth matching, so a full glob
//! syntax would only be a second way to write the same lists.

/// Whether `text` matches `glob`, where `*` matches any run of characters (none included) and
/// every other character itself. Tool names and globs are short: the backtracking is over a
/// few dozen bytes.
pub fn matches(glob: &str, text: &str) -> bool {
    let (glob, text) = (glob.as_bytes(), text.as_bytes());
    let (mut g, mut t) = (0, 0);
    // Where the last `*` was, and the text position it has matched up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if g < glob.len() && glob[g] == b'*' {
            star = Some((g, t));
            g += 1;
        } else if g < glob.len() && glob[g] == text[t] {
            g += 1;
            t += 1;
        } else if let Some((star_g, star_t)) = star {
            g = star_g + 1;
            t = star_t + 1;
            star = Some((star_g, star_t + 1));
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(matches("*", ""));
        assert!(matches("*", "anything"));
        assert!(matches("github__*", "github__search"));
        assert!(!matches("github__*", "gitlab__search"));
        assert!(matches("calc__add", "calc__add"));
        assert!(!matches("calc__add", "calc__adder"));
        assert!(matches("*__read_*", "fs__read_file"));
        assert!(matches("a*b*c", "aXbYbZc"));
        assert!(!matches("a*b*c", "aXbYbZ"));
        assert!(matches("**", "x"));
    }
}
