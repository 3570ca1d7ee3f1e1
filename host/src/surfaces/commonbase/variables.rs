//! `{{name}}` placeholders, filled from the request's `variables`.
//!
//! Filling is where a small request can become a huge one (`{{a}}` a hundred
//! thousand times, `a` half a megabyte long), so the text a request may grow
//! to is capped and checked before anything is appended.

use std::collections::HashMap;

use crate::error::ApiError;

/// What is left of a request's expansion cap, shared by its prompt and every
/// message so that the request as a whole stays within the cap.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    remaining: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Budget {
        Budget {
            limit,
            remaining: limit,
        }
    }

    /// Takes `len` bytes from the budget, or fails naming the limit.
    fn take(&mut self, len: usize) -> Result<(), ApiError> {
        match self.remaining.checked_sub(len) {
            Some(rest) => {
                self.remaining = rest;
                Ok(())
            }
            None => Err(ApiError::ExpansionTooLarge(self.limit)),
        }
    }
}

/// Replaces every `{{name}}` (spaces inside the braces allowed) in `text`.
/// A placeholder without a variable is the caller's mistake, named with its `place`.
/// Values are inserted as they are: a placeholder inside a value stays text.
pub fn fill(
    text: &str,
    variables: &HashMap<String, String>,
    place: &str,
    budget: &mut Budget,
) -> Result<String, ApiError> {
    let mut out = String::new();
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
        budget.take(start + value.len())?;
        out.push_str(&rest[..start]);
        out.push_str(value);
        rest = &rest[start + 2 + len + 2..];
    }
    budget.take(rest.len())?;
    out.push_str(rest);
    Ok(out)
}

/// [`fill`] of a text the caller owns, if the request has `variables`: one without
/// placeholders is counted and kept as it is, not copied. `place` is computed only for an
/// error.
pub fn fill_owned(
    text: String,
    variables: Option<&HashMap<String, String>>,
    place: impl FnOnce() -> String,
    budget: &mut Budget,
) -> Result<String, ApiError> {
    match variables {
        // Nothing to fill in: the body's own size limit holds.
        None => Ok(text),
        Some(variables) if text.contains("{{") => fill(&text, variables, &place(), budget),
        Some(_) => {
            budget.take(text.len())?;
            Ok(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vars() -> HashMap<String, String> {
        HashMap::from([
            ("name".into(), "Ada".into()),
            ("x".into(), "{{name}}".into()),
        ])
    }

    fn fill_unbounded(text: &str, variables: &HashMap<String, String>) -> Result<String, ApiError> {
        fill(text, variables, "prompt", &mut Budget::new(usize::MAX))
    }

    #[test]
    fn fills_every_placeholder_once() {
        assert_eq!(
            fill_unbounded("Hi {{name}}, {{ name }}! {{x}}", &vars()).unwrap(),
            "Hi Ada, Ada! {{name}}"
        );
        assert_eq!(
            fill_unbounded("no braces {{ here", &vars()).unwrap(),
            "no braces {{ here"
        );
    }

    #[test]
    fn a_missing_variable_names_itself_and_the_place() {
        let err = fill(
            "{{who}}",
            &vars(),
            "messages[1].content",
            &mut Budget::new(100),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("who") && err.contains("messages[1].content"),
            "{err}"
        );
    }

    #[test]
    fn the_budget_is_shared_and_checked_before_appending() {
        let variables = HashMap::from([("a".to_owned(), "X".repeat(500_000))]);
        let bomb = "{{a}}".repeat(100_000);
        let mut budget = Budget::new(4 * 1024 * 1024);
        let err = fill(&bomb, &variables, "prompt", &mut budget).unwrap_err();
        assert!(matches!(err, ApiError::ExpansionTooLarge(4194304)), "{err}");
        assert!(err.to_string().contains("4194304"), "{err}");

        // Two texts of 6 bytes each fit 12 bytes, not 11.
        let mut budget = Budget::new(12);
        fill("{{name}}Ada", &vars(), "a", &mut budget).unwrap();
        fill("AdaAda", &vars(), "b", &mut budget).unwrap();
        let mut budget = Budget::new(11);
        fill("{{name}}Ada", &vars(), "a", &mut budget).unwrap();
        assert!(fill("AdaAda", &vars(), "b", &mut budget).is_err());
    }

    /// The reference semantics: what `fill` must produce when it succeeds.
    fn naive(text: &str, variables: &HashMap<String, String>) -> Option<String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            let Some(len) = rest[start + 2..].find("}}") else {
                break;
            };
            out += &rest[..start];
            out += variables.get(rest[start + 2..start + 2 + len].trim())?;
            rest = &rest[start + 2 + len + 2..];
        }
        Some(out + rest)
    }

    fn text_with_placeholders() -> impl Strategy<Value = String> {
        // Mostly braces, names and spaces, so placeholders (whole and broken) are common.
        proptest::collection::vec(
            prop_oneof![
                Just("{{".to_owned()),
                Just("}}".to_owned()),
                Just("{{a}}".to_owned()),
                Just("{{ b }}".to_owned()),
                Just("{{ c}}".to_owned()),
                "[ab{} é]{0,4}",
            ],
            0..24,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever the text and values, the output never exceeds the budget;
        /// within it, the output is the one-pass substitution (values never re-expanded).
        #[test]
        fn output_is_bounded_and_values_are_not_re_expanded(
            text in text_with_placeholders(),
            a in text_with_placeholders(),
            b in "[{}ab]{0,40}",
            limit in 0usize..400,
        ) {
            let variables = HashMap::from([
                ("a".to_owned(), a),
                ("b".to_owned(), b),
                ("c".to_owned(), "{{a}}".to_owned()),
            ]);
            let mut budget = Budget::new(limit);
            match fill(&text, &variables, "prompt", &mut budget) {
                Ok(out) => {
                    prop_assert!(out.len() <= limit);
                    prop_assert_eq!(Some(out.clone()), naive(&text, &variables));
                    prop_assert_eq!(budget.remaining, limit - out.len());
                }
                Err(ApiError::ExpansionTooLarge(l)) => {
                    prop_assert_eq!(l, limit);
                    let whole = naive(&text, &variables);
                    // Over the cap only when the whole expansion is (or a missing
                    // variable comes after the cap was reached).
                    prop_assert!(whole.is_none_or(|w| w.len() > limit));
                }
                Err(ApiError::BadRequest(message)) => {
                    prop_assert!(naive(&text, &variables).is_none(), "{}", message);
                }
                Err(other) => prop_assert!(false, "unexpected error {}", other),
            }
        }
    }
}
