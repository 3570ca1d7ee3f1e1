//! `cargo xtask links`: every relative link of the documentation leads somewhere.
//!
//! Reads `README.md`, `ARCHITECTURE.md` and every `.md` under `docs/`, and checks each
//! inline link (`[text](target)`, images too) outside code: the file or directory it names
//! exists, and a `#anchor` (into a Markdown file, or the page itself) is the slug GitHub gives
//! one of that file's headings. External links (`http:`, `https:`, `mailto:`) are not checked:
//! CI runs without the network.
//!
//! A short scan of the text rather than a Markdown crate: the documentation uses inline links
//! and ATX headings only, and a scan needs no dependency and runs in milliseconds in `.ci/run`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The Markdown files checked, relative to the workspace root: these two and `docs/**/*.md`.
const TOP_LEVEL: &[&str] = &["README.md", "ARCHITECTURE.md"];

/// `cargo xtask links`: fails listing every broken link, one a line.
pub fn command(root: &Path) -> Result<(), String> {
    let count = check(root)?;
    eprintln!("xtask: the {count} links of the documentation resolve");
    Ok(())
}

/// Checks the documentation under `root`: how many links it has, or the broken ones.
fn check(root: &Path) -> Result<usize, String> {
    let mut files: Vec<PathBuf> = TOP_LEVEL.iter().map(|f| root.join(f)).collect();
    markdown_under(&root.join("docs"), &mut files)?;
    let mut anchors = BTreeMap::new();
    let mut broken = Vec::new();
    let mut count = 0;
    for file in &files {
        let text = read(file)?;
        for link in links(&text) {
            count += 1;
            if let Err(problem) = resolve(file, &link.target, &mut anchors) {
                let shown = file.strip_prefix(root).unwrap_or(file).display();
                broken.push(format!(
                    "{shown}:{}: ({}) {problem}",
                    link.line, link.target
                ));
            }
        }
    }
    if broken.is_empty() {
        Ok(count)
    } else {
        Err(format!(
            "{} broken link(s):\n{}",
            broken.len(),
            broken.join("\n")
        ))
    }
}

fn read(file: &Path) -> Result<String, String> {
    std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))
}

fn markdown_under(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    paths.sort();
    for path in paths {
        if path.is_dir() {
            markdown_under(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    Ok(())
}

/// Whether `target`, a link in `file`, leads to something; `anchors` keeps each Markdown
/// file's heading slugs once read.
fn resolve(
    file: &Path,
    target: &str,
    anchors: &mut BTreeMap<PathBuf, BTreeSet<String>>,
) -> Result<(), String> {
    if ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| target.starts_with(scheme))
    {
        return Ok(());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let dir = file.parent().unwrap_or(Path::new("."));
    let linked = if path.is_empty() {
        file.to_path_buf()
    } else {
        normalize(&dir.join(path))
    };
    if !linked.exists() {
        return Err(format!("no file {}", linked.display()));
    }
    let Some(anchor) = anchor else {
        return Ok(());
    };
    if linked.extension().is_none_or(|e| e != "md") {
        return Err("an anchor into a file that is not Markdown".to_owned());
    }
    let slugs = match anchors.get(&linked) {
        Some(slugs) => slugs,
        None => {
            let slugs = heading_slugs(&read(&linked)?);
            anchors.entry(linked).or_insert(slugs)
        }
    };
    if slugs.contains(anchor) {
        Ok(())
    } else {
        Err(format!("no heading with the anchor #{anchor}"))
    }
}

/// `a/b/../c` as `a/c`, so that a link out of `docs/` and back is one path.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// One inline link: where it points and the line it is on (from 1).
#[derive(Debug, PartialEq)]
struct Link {
    target: String,
    line: usize,
}

/// The lines of `text` that are not in a fenced code block, with their numbers (from 1).
fn prose(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines().enumerate().filter_map(move |(at, line)| {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            return None;
        }
        (!fenced).then_some((at + 1, line))
    })
}

/// Every `](target)` of `text` outside code blocks and code spans. A code span may run over a
/// line break, not over a blank line (a new paragraph).
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    let mut span: Option<usize> = None;
    for (line_number, line) in prose(text) {
        if line.trim().is_empty() {
            span = None;
        }
        let bytes = line.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            if bytes[at] == b'`' {
                let run = bytes[at..].iter().take_while(|&&b| b == b'`').count();
                span = match span {
                    None => Some(run),
                    Some(open) if open == run => None,
                    open => open,
                };
                at += run;
                continue;
            }
            // Bytes, not `str` slices: `at` may be inside a character such as `—`.
            if span.is_none() && bytes[at..].starts_with(b"](") {
                let rest = &line[at + 2..];
                if let Some(end) = rest.find(')') {
                    // A title (`(path "title")`) is not part of the target.
                    let target = rest[..end].split_whitespace().next().unwrap_or_default();
                    found.push(Link {
                        target: target.to_owned(),
                        line: line_number,
                    });
                }
            }
            at += 1;
        }
    }
    found
}

/// The anchors of `text`'s headings (ATX, `#` to `######`, outside code blocks), as GitHub
/// makes them: [`slug`], with `-1`, `-2`, ... after a slug already taken.
fn heading_slugs(text: &str) -> BTreeSet<String> {
    let mut slugs = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (_, line) in prose(text) {
        let level = line.bytes().take_while(|&b| b == b'#').count();
        if !(1..=6).contains(&level) || !line[level..].starts_with(' ') {
            continue;
        }
        let base = slug(&heading_text(&line[level..]));
        let times = seen.entry(base.clone()).or_insert(0);
        let anchor = match *times {
            0 => base,
            n => format!("{base}-{n}"),
        };
        *times += 1;
        slugs.insert(anchor);
    }
    slugs
}

/// A heading's text as GitHub slugs it: a link's target dropped (its text kept), and a closing
/// run of `#` too.
fn heading_text(heading: &str) -> String {
    let heading = heading.trim().trim_end_matches('#').trim_end();
    let mut text = String::new();
    let mut rest = heading;
    while let Some(at) = rest.find("](") {
        text.push_str(&rest[..at]);
        rest = match rest[at..].find(')') {
            Some(end) => &rest[at + end + 1..],
            None => "",
        };
    }
    text.push_str(rest);
    text
}

/// GitHub's anchor for a heading's text: lower case; letters, digits, `-` and `_` kept, a space
/// made `-`, everything else dropped.
pub fn slug(text: &str) -> String {
    text.trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_githubs() {
        assert_eq!(
            slug("Rate limits, budgets and key scopes"),
            "rate-limits-budgets-and-key-scopes"
        );
        assert_eq!(
            slug("The PII guard (`pii-guard`)"),
            "the-pii-guard-pii-guard"
        );
        assert_eq!(slug("Routes: `[providers.ID]`"), "routes-providersid");
        assert_eq!(
            slug("snake_case and kebab-case"),
            "snake_case-and-kebab-case"
        );
        assert_eq!(
            slug("Issue 28: what a guard costs — 2026-11-27"),
            "issue-28-what-a-guard-costs--2026-11-27"
        );
        assert_eq!(slug("Ünïcode Wörds 2"), "ünïcode-wörds-2");
        assert_eq!(slug("  spaced  "), "spaced");
    }

    #[test]
    fn repeated_headings_are_numbered_and_code_is_not_a_heading() {
        let text = "# Top\n## Usage\n```sh\n# not a heading\n```\n## Usage\n### Usage\n#nospace\n";
        let slugs: Vec<String> = heading_slugs(text).into_iter().collect();
        assert_eq!(slugs, ["top", "usage", "usage-1", "usage-2"]);
    }

    #[test]
    fn heading_links_keep_their_text() {
        assert_eq!(
            slug(&heading_text(" See [the book](docs/README.md) ##")),
            "see-the-book"
        );
    }

    #[test]
    fn links_outside_code_are_found_with_their_lines() {
        let text = "A — [link](a.md#x) and ![img](b.png \"title\").\n\
                    `[not](c.md)` and ``[nor](`d.md`)``; a span `over\n\
                    a line [no](e.md)` ends.\n\
                    \n\
                    ```\n[fenced](f.md)\n```\n\
                    [last](https://example.com)\n";
        let targets: Vec<(String, usize)> = links(text)
            .into_iter()
            .map(|l| (l.target, l.line))
            .collect();
        assert_eq!(
            targets,
            [
                ("a.md#x".to_owned(), 1),
                ("b.png".to_owned(), 1),
                ("https://example.com".to_owned(), 8)
            ]
        );
    }

    #[test]
    fn files_and_anchors_are_resolved() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let docs = dir.path().join("docs");
        std::fs::create_dir(&docs).expect("docs/");
        std::fs::write(dir.path().join("README.md"), "# Title\n## Two words\n").expect("README.md");
        let page = docs.join("page.md");
        std::fs::write(&page, "# Page\n").expect("page.md");
        let mut anchors = BTreeMap::new();
        for good in [
            "../README.md",
            "../README.md#two-words",
            "#page",
            "../docs",
            "https://x.y/#z",
        ] {
            assert_eq!(resolve(&page, good, &mut anchors), Ok(()), "{good}");
        }
        for (bad, problem) in [
            (
                "../README.md#three-words",
                "no heading with the anchor #three-words",
            ),
            ("missing.md", "no file"),
            ("#nowhere", "no heading"),
        ] {
            let error = resolve(&page, bad, &mut anchors).expect_err(bad);
            assert!(error.starts_with(problem), "{bad}: {error}");
        }
    }
}
