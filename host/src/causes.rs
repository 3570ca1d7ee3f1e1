//! Leaf: an error with its causes as one line ("error sending request: connection refused"),
//! since many errors' own text (reqwest's, tokio-postgres's, deadpool's, openidconnect's) says
//! only their kind.

/// `error`, then each of its causes, joined by ": ".
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
