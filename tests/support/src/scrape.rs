//! `GET /metrics` read as Prometheus reads it: a parser of the text format, and a series' value.

use prometheus_parse::{Sample, Scrape, Value};

use crate::{Gateway, Response};

/// A scrape of `gw`'s `/metrics` (with `token` when given), parsed.
pub fn scrape(gw: &Gateway, token: Option<&str>) -> Vec<Sample> {
    parsed(&gw.get("/metrics", token))
}

/// A `/metrics` answer, checked (200, the text format's content type) and parsed.
pub fn parsed(response: &Response) -> Vec<Sample> {
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = response.text();
    Scrape::parse(text.lines().map(|line| Ok(line.to_owned())))
        .unwrap_or_else(|e| panic!("not the Prometheus text format ({e}):\n{text}"))
        .samples
}

/// The value of the sample `name` whose labels include `labels` (at most one may); 0 when
/// there is none.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let matching: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert!(
        matching.len() <= 1,
        "{name} {labels:?} matches {}",
        matching.len()
    );
    match matching.first().map(|s| &s.value) {
        None => 0.0,
        Some(Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v)) => *v,
        Some(other) => panic!("{name} {labels:?} is not a plain value: {other:?}"),
    }
}
