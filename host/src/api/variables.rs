//! `{{name}}` placeholders, filled from the request's `variables`.

use std::collections::HashMap;

use crate::error::ApiError;

/// Replaces every `{{name}}` (spaces inside the braces allowed) in `text`.
/// A placeholder without a variable is the caller's mistake, named with its `place`.
pub fn fill(
    text: &str,
    variables: &HashMap<String, String>,
    place: &str,
) -> Result<String, ApiError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        let name = rest[start + 2..start + 2 + len].trim();
        let value = variables.get(name).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "{place} uses the variable {{{{{name}}}}} but variables has no {name:?}"
            ))
        })?;
        out.push_str(&rest[..start]);
        out.push_str(value);
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> HashMap<String, String> {
        HashMap::from([
            ("name".into(), "Ada".into()),
            ("x".into(), "{{name}}".into()),
        ])
    }

    #[test]
    fn fills_every_placeholder_once() {
        assert_eq!(
            fill("Hi {{name}}, {{ name }}! {{x}}", &vars(), "prompt").unwrap(),
            "Hi Ada, Ada! {{name}}"
        );
        assert_eq!(
            fill("no braces {{ here", &vars(), "p").unwrap(),
            "no braces {{ here"
        );
    }

    #[test]
    fn a_missing_variable_names_itself_and_the_place() {
        let err = fill("{{who}}", &vars(), "messages[1].content")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("who") && err.contains("messages[1].content"),
            "{err}"
        );
    }
}
