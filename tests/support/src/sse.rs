//! Server-sent events, read the way a client does: a body split into events at blank lines
//! (LF or CRLF, as the providers write them), and an event's `data`.

/// `body`'s events, each with its terminating blank line, so that concatenated they give back
/// `body` (a last event without one is kept too; trailing whitespace is not).
pub fn split_events(body: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut rest = body;
    loop {
        let end = [("\r\n\r\n", 4), ("\n\n", 2)]
            .iter()
            .filter_map(|(separator, len)| rest.find(separator).map(|at| at + len))
            .min();
        match end {
            Some(end) => {
                events.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
            None => break,
        }
    }
    if !rest.trim().is_empty() {
        events.push(rest.to_owned());
    }
    events
}

/// The joined `data:` lines of one event, `None` when it has none (comments).
pub fn event_data(event: &str) -> Option<String> {
    let mut data: Option<String> = None;
    for line in event.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(rest);
                }
                None => data = Some(rest.to_owned()),
            }
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_lf_and_crlf_blank_lines_and_keeps_every_byte() {
        let body = "data: 1\n\ndata: 2\r\n\r\n: comment\n\ndata: 3";
        let events = split_events(body);
        assert_eq!(
            events,
            ["data: 1\n\n", "data: 2\r\n\r\n", ": comment\n\n", "data: 3"]
        );
        assert_eq!(events.concat(), body);
        let data: Vec<Option<String>> = events.iter().map(|e| event_data(e)).collect();
        assert_eq!(
            data,
            [Some("1".into()), Some("2".into()), None, Some("3".into())]
        );
    }
}
