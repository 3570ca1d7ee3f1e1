//! The markdown report: sections of tables, the targets of issues 5 and 25 with a
//! plain verdict each, and any problem that makes the run fail.

use std::fmt::Write as _;

/// A markdown table.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        out.push_str(&line(&self.header));
        let rule: Vec<String> = self
            .header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---".into() } else { "---:".into() })
            .collect();
        out.push_str(&line(&rule));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

/// How a measured figure compares with its target.
pub enum Verdict {
    Met,
    /// Missed, with by how much.
    Missed(String),
    /// Not measured in this run (e.g. the scenario was not selected, or a smoke run).
    NotMeasured(String),
}

/// One target of the issue.
pub struct Check {
    pub what: String,
    pub goal: String,
    pub measured: String,
    pub verdict: Verdict,
}

impl Check {
    /// A figure that must not exceed `limit` (both in the same unit).
    pub fn at_most(what: &str, goal: &str, measured: f64, limit: f64, shown: String) -> Check {
        let verdict = if measured <= limit {
            Verdict::Met
        } else {
            Verdict::Missed(format!(
                "{:.2}x the limit",
                measured / limit.max(f64::MIN_POSITIVE)
            ))
        };
        Check {
            what: what.into(),
            goal: goal.into(),
            measured: shown,
            verdict,
        }
    }

    /// A figure that must reach at least `limit`.
    pub fn at_least(what: &str, goal: &str, measured: f64, limit: f64, shown: String) -> Check {
        let verdict = if measured >= limit {
            Verdict::Met
        } else {
            Verdict::Missed(format!(
                "{:.0}% of the goal",
                100.0 * measured / limit.max(f64::MIN_POSITIVE)
            ))
        };
        Check {
            what: what.into(),
            goal: goal.into(),
            measured: shown,
            verdict,
        }
    }
}

/// The whole report.
#[derive(Default)]
pub struct Report {
    pub header: Vec<String>,
    sections: Vec<String>,
    checks: Vec<Check>,
    /// Failures that make the run exit non-zero (errors from a server, lost frames).
    pub problems: Vec<String>,
}

impl Report {
    pub fn section(&mut self, title: &str, intro: &str, tables: &[&Table]) {
        let mut text = format!("## {title}\n\n");
        if !intro.is_empty() {
            text.push_str(intro);
            text.push_str("\n\n");
        }
        for table in tables {
            text.push_str(&table.render());
            text.push('\n');
        }
        self.sections.push(text);
    }

    pub fn check(&mut self, check: Check) {
        self.checks.push(check);
    }

    pub fn render(&self) -> String {
        let mut out = String::from("# Gateway benchmark\n\n");
        for line in &self.header {
            let _ = writeln!(out, "{line}  ");
        }
        out.push('\n');
        for section in &self.sections {
            out.push_str(section);
        }
        if !self.checks.is_empty() {
            let mut table = Table::new(&["target", "goal", "measured", "verdict"]);
            for check in &self.checks {
                let verdict = match &check.verdict {
                    Verdict::Met => "met".to_owned(),
                    Verdict::Missed(by) => format!("**missed** ({by})"),
                    Verdict::NotMeasured(why) => format!("not measured ({why})"),
                };
                table.row(vec![
                    check.what.clone(),
                    check.goal.clone(),
                    check.measured.clone(),
                    verdict,
                ]);
            }
            out.push_str("## Targets (issues 5 and 25)\n\n");
            out.push_str(&table.render());
            out.push('\n');
        }
        if !self.problems.is_empty() {
            out.push_str("## Problems\n\n");
            for problem in &self.problems {
                let _ = writeln!(out, "- {problem}");
            }
            out.push('\n');
        }
        out
    }
}

/// Nanoseconds as milliseconds with microsecond resolution.
pub fn ms(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

/// A difference in nanoseconds as signed milliseconds.
pub fn ms_signed(ns: f64) -> String {
    format!("{:+.3}", ns / 1e6)
}

/// KiB as MiB.
pub fn mib(kib: f64) -> String {
    format!("{:.1}", kib / 1024.0)
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Today's date (UTC) as YYYY-MM-DD, from the system clock.
pub fn today() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    now.get(..10).unwrap_or(&now).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }

    #[test]
    fn tables_render_as_markdown() {
        let mut table = Table::new(&["path", "p50"]);
        table.row(vec!["direct".into(), "0.066".into()]);
        assert_eq!(
            table.render(),
            "| path | p50 |\n| --- | ---: |\n| direct | 0.066 |\n"
        );
    }

    #[test]
    fn verdicts() {
        assert!(matches!(
            Check::at_most("x", "<= 1", 0.5, 1.0, String::new()).verdict,
            Verdict::Met
        ));
        assert!(matches!(
            Check::at_least("x", ">= 1", 0.5, 1.0, String::new()).verdict,
            Verdict::Missed(_)
        ));
        assert_eq!(today().len(), 10);
    }
}
