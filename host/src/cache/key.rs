//! The key of a cached answer: SHA-256 over the request as the plugin receives it, in the
//! host's surface-independent types (so an OpenAI- and an Anthropic-format request that mean
//! the same thing share it), with whose it is. Never the caller's headers, nor the route's key
//! and settings; the caller's own provider key (`Provider-API-Key`) only as its digest, so that
//! an answer one caller's key paid for is never served to a caller with another key.

use std::hash::{Hash, Hasher};

use sha2::{Digest, Sha256};

use crate::plugins::types;

/// Changes whenever what goes into a key does, so that replicas of another version miss
/// rather than read an entry meant for another request.
const VERSION: &[u8] = b"gateway response cache 2\0";

/// A SHA-256 digest naming one cached answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    pub fn hex(&self) -> String {
        crate::encoding::hex(&self.0)
    }
}

/// Who may read an entry: the project that asked (`cache_scope = "project"`), or every
/// caller of the route (`"route"`).
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    Project(&'a str),
    Route,
}

/// What a request asks its plugin, as its key covers it.
#[derive(Debug, Clone, Copy)]
pub enum Question<'a> {
    Complete {
        prompt: &'a types::Prompt,
        functions: &'a [types::FunctionDef],
        function_choice: Option<&'a types::FunctionChoice>,
        reasoning: Option<&'a types::ReasoningConfig>,
        /// What the answer may hold: a request capped lower (under a limit) is another question.
        output: types::OutputLimit,
    },
    Embed {
        input: &'a [String],
    },
}

/// The key of `question` to `model` of `route`, with its pass-through `params` (a JSON object
/// text: read and written again, so that the order of its keys does not matter), asked with
/// the caller's own provider key `caller_key` when it brought one.
pub fn key(
    scope: Scope<'_>,
    caller_key: Option<&str>,
    route: &str,
    model: &str,
    question: Question<'_>,
    params: &str,
) -> CacheKey {
    let mut hasher = Sha(Sha256::new());
    hasher.write(VERSION);
    match scope {
        Scope::Project(project) => Some(project).hash(&mut hasher),
        Scope::Route => None::<&str>.hash(&mut hasher),
    }
    // The key's digest, not the key: the hasher's input is never kept, but this way the key
    // is not even copied.
    caller_key
        .map(|key| <[u8; 32]>::from(Sha256::digest(key.as_bytes())))
        .hash(&mut hasher);
    route.hash(&mut hasher);
    model.hash(&mut hasher);
    match question {
        Question::Complete {
            prompt,
            functions,
            function_choice,
            reasoning,
            output,
        } => {
            0u8.hash(&mut hasher);
            prompt.hash(&mut hasher);
            functions.hash(&mut hasher);
            function_choice.hash(&mut hasher);
            reasoning.hash(&mut hasher);
            output.hash(&mut hasher);
        }
        Question::Embed { input } => {
            1u8.hash(&mut hasher);
            input.hash(&mut hasher);
        }
    }
    // serde_json's maps are sorted by key (its `preserve_order` feature is off), so the text
    // written again is the same for the same object. Text that is no JSON is the plugin's to
    // refuse; it is hashed as it came.
    match serde_json::from_str::<serde_json::Value>(params) {
        Ok(value) => value.to_string().hash(&mut hasher),
        Err(_) => params.hash(&mut hasher),
    }
    CacheKey(hasher.0.finalize().into())
}

/// `Hash` into SHA-256: the derived `Hash` of the request's types writes every field, length
/// prefixes and enum variants included, so equal requests and only they give equal bytes.
struct Sha(Sha256);

impl Hasher for Sha {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    /// Never read: the key is the whole digest ([`Sha256::finalize`]).
    fn finish(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::types::{Message, Part, Prompt, Role};

    fn chat(text: &str) -> Prompt {
        Prompt::Chat(vec![Message::new(
            Role::User,
            vec![Part::Text(text.into())],
        )])
    }

    fn of(scope: Scope<'_>, model: &str, prompt: &Prompt, params: &str) -> CacheKey {
        let question = Question::Complete {
            prompt,
            functions: &[],
            function_choice: None,
            reasoning: None,
            output: types::OutputLimit::default(),
        };
        key(scope, None, "r", model, question, params)
    }

    #[test]
    fn the_same_request_has_the_same_key_whatever_the_order_of_its_params() {
        let prompt = chat("hi");
        let a = of(
            Scope::Route,
            "m",
            &prompt,
            r#"{"temperature":0,"max_tokens":5}"#,
        );
        let b = of(
            Scope::Route,
            "m",
            &prompt,
            r#"{ "max_tokens": 5, "temperature": 0 }"#,
        );
        assert_eq!(a, b);
        assert_eq!(a.hex().len(), 64);
    }

    #[test]
    fn anything_the_plugin_would_see_differently_changes_the_key() {
        let prompt = chat("hi");
        let base = of(Scope::Route, "m", &prompt, "{}");
        assert_ne!(base, of(Scope::Route, "m2", &prompt, "{}"));
        assert_ne!(base, of(Scope::Route, "m", &chat("hi!"), "{}"));
        assert_ne!(base, of(Scope::Route, "m", &prompt, r#"{"n":2}"#));
        assert_ne!(base, of(Scope::Project("p"), "m", &prompt, "{}"));
        assert_ne!(
            of(Scope::Project("p"), "m", &prompt, "{}"),
            of(Scope::Project("q"), "m", &prompt, "{}")
        );
        assert_ne!(
            base,
            of(Scope::Route, "m", &Prompt::Text("hi".into()), "{}")
        );
        // A part split in two is another request: lengths are part of what is hashed.
        let split = Prompt::Chat(vec![Message::new(
            Role::User,
            vec![Part::Text("h".into()), Part::Text("i".into())],
        )]);
        assert_ne!(base, of(Scope::Route, "m", &split, "{}"));
        let embed = key(
            Scope::Route,
            None,
            "r",
            "m",
            Question::Embed {
                input: &["hi".to_owned()],
            },
            "{}",
        );
        assert_ne!(base, embed);
        let with_tools = key(
            Scope::Route,
            None,
            "r",
            "m",
            Question::Complete {
                prompt: &prompt,
                functions: &[types::FunctionDef {
                    name: "f".into(),
                    description: None,
                    parameters: None,
                }],
                function_choice: None,
                reasoning: None,
                output: types::OutputLimit::default(),
            },
            "{}",
        );
        assert_ne!(base, with_tools);
        let capped = |max_tokens| {
            let question = Question::Complete {
                prompt: &prompt,
                functions: &[],
                function_choice: None,
                reasoning: None,
                output: types::OutputLimit {
                    max_tokens,
                    choices: 1,
                },
            };
            key(Scope::Route, None, "r", "m", question, "{}")
        };
        assert_eq!(base, capped(None));
        assert_ne!(base, capped(Some(5)));
    }

    #[test]
    fn a_callers_own_provider_key_has_entries_of_its_own() {
        let prompt = chat("hi");
        let question = Question::Complete {
            prompt: &prompt,
            functions: &[],
            function_choice: None,
            reasoning: None,
            output: types::OutputLimit::default(),
        };
        let with = |caller_key| key(Scope::Route, caller_key, "r", "m", question, "{}");
        assert_ne!(with(None), with(Some("sk-a")));
        assert_ne!(with(Some("sk-a")), with(Some("sk-b")));
        assert_eq!(with(Some("sk-a")), with(Some("sk-a")));
    }
}
