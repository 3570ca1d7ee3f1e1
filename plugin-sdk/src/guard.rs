//! Write guard plugins: checks every request before it reaches the provider
//! plugin, and every answer before it reaches the caller.
//!
//! A guard is a component of the `guard` world (`wit/guard.wit`), not of the
//! `provider` world: a crate is one or the other. It sees the request as the
//! provider would (prompt or embedding texts, functions, params) but never the
//! route's keys, and answers with a verdict: let it through, refuse it (the
//! caller gets a 400 naming the guard and the reason), or send something else
//! instead (recorded with counts by kind of what changed, never the removed
//! text).
//!
//! 1. implement [`Guard`] for a unit struct (each request has a fresh
//!    instance, so there is no state to keep between requests);
//! 2. call [`export_guard!`](crate::export_guard) with that struct;
//! 3. build the crate as a `cdylib` for `wasm32-wasip2`, as a provider.
//!
//! ```no_run,standalone_crate
//! use gateway_plugin_sdk::guard::*;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, Default)]
//! #[serde(default, deny_unknown_fields)]
//! struct Settings {
//!     word: String,
//! }
//!
//! struct NoWord;
//!
//! impl Guard for NoWord {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("no-word", env!("CARGO_PKG_VERSION"), Vec::new())
//!     }
//!
//!     /// Replaces the configured word in every text the model would see.
//!     fn check_request(request: CheckedRequest) -> RequestVerdict {
//!         let settings: Settings = request.settings().unwrap_or_else(|e| panic!("{e}"));
//!         RequestVerdict::rewrite_texts(request.input, |text, changes| {
//!             let found = text.matches(settings.word.as_str()).count();
//!             if found > 0 && !settings.word.is_empty() {
//!                 *text = text.replace(settings.word.as_str(), "[WORD]");
//!                 changes.add("word", found as u32);
//!             }
//!         })
//!     }
//! }
//!
//! export_guard!(NoWord);
//! ```
//!
//! The crate builds natively too: a guard's unit tests call
//! `MyGuard::check_request(request)` directly.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;

pub use crate::export_guard;
pub use crate::{
    Choice, Completion, FinishReason, FunctionDef, Message, Part, PluginInfo, Prompt, Role, kv, log,
};

/// A request as the provider would receive it, without the route's keys and
/// secrets: the guard's id and settings, the route, the model, the input,
/// the functions offered and the caller's params (JSON text).
pub use __bindings::gateway::provider::guard_types::CheckedRequest;

/// What the request asks the model: a prompt (text or chat), or an embedding
/// request's texts.
pub use __bindings::gateway::provider::guard_types::Input;

/// One kind of change and how often it was made (`email`, 2).
pub use __bindings::gateway::provider::guard_types::Change;

/// The input to send instead of the caller's, and what changed.
pub use __bindings::gateway::provider::guard_types::RequestRewrite;

/// The text of each choice to answer instead, and what changed.
pub use __bindings::gateway::provider::guard_types::AnswerRewrite;

/// A guard's decision on a request: allow, deny (with the reason the caller
/// sees), or rewrite.
pub use __bindings::gateway::provider::guard_types::RequestVerdict;

/// A guard's decision on an answer: allow, deny, or rewrite its choices'
/// texts.
pub use __bindings::gateway::provider::guard_types::AnswerVerdict;

/// A guard plugin: the checks the gateway calls.
///
/// The functions take no `self` and their arguments by value, as
/// [`Provider`](crate::Provider)'s do: each request has a fresh instance
/// (its answer's check usually runs in the instance that checked it, but may
/// run in another, so keep nothing between them), and owning the request
/// lets a rewrite hand its input back without copying it.
///
/// Both checks allow by default, so a guard of requests only implements
/// [`Guard::check_request`].
pub trait Guard {
    /// Its name and version (no models). Called when the gateway loads it.
    fn info() -> PluginInfo;

    /// Decides on a request before the provider plugin sees it.
    ///
    /// A rewrite must keep the input's kind (a prompt for a prompt, as many
    /// embedding texts as before); [`RequestVerdict::rewrite_texts`] does.
    fn check_request(request: CheckedRequest) -> RequestVerdict {
        let _ = request;
        RequestVerdict::Allow
    }

    /// Decides on the whole answer (for a stream, once it ended) before the
    /// caller sees it, or sees the rest of it.
    ///
    /// A rewrite gives one text per choice, in order;
    /// [`AnswerVerdict::rewrite_texts`] does.
    fn check_response(request: CheckedRequest, answer: Completion) -> AnswerVerdict {
        let _ = (request, answer);
        AnswerVerdict::Allow
    }
}

impl CheckedRequest {
    /// The guard's settings (the operator's `[guards.ID] settings` table) as
    /// `T`, read as [`Route::settings`](crate::Route::settings) reads a
    /// provider's: give `T` `#[serde(deny_unknown_fields)]` so that a misspelt
    /// setting is refused, `#[serde(default)]` for optional ones.
    ///
    /// The error names the guard and the setting. It is the operator's
    /// mistake, not the caller's, so do not deny with it: panic with it
    /// (`unwrap_or_else(|e| panic!("{e}"))`). The instance traps, the
    /// gateway refuses the request (a guard fails closed) and logs the
    /// message.
    ///
    /// ```
    /// use gateway_plugin_sdk::guard::{CheckedRequest, Input, Prompt};
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize, Default, Debug)]
    /// #[serde(default, deny_unknown_fields)]
    /// struct Settings {
    ///     strict: bool,
    /// }
    ///
    /// let request = |settings: &str| CheckedRequest {
    ///     guard: "pii".into(),
    ///     settings: settings.into(),
    ///     route: "openai".into(),
    ///     model: "m".into(),
    ///     input: Input::Prompt(Prompt::Text("hi".into())),
    ///     functions: Vec::new(),
    ///     params: "{}".into(),
    /// };
    /// assert!(request(r#"{"strict": true}"#).settings::<Settings>().unwrap().strict);
    /// assert_eq!(
    ///     request(r#"{"strict": 1}"#).settings::<Settings>().unwrap_err(),
    ///     "guard `pii`: setting `strict`: invalid type: integer `1`, expected a boolean"
    /// );
    /// ```
    pub fn settings<T: DeserializeOwned>(&self) -> Result<T, String> {
        // One reader of settings for providers and guards: the route's, whose messages
        // start with "route ``" for this nameless route.
        let route = crate::Route {
            id: String::new(),
            base_url: String::new(),
            api_key: None,
            settings: self.settings.clone(),
            secrets: Vec::new(),
        };
        route.settings().map_err(|error| {
            let message = match error {
                crate::ProviderError::Failed(message) => message,
                other => format!("{other:?}"),
            };
            let problem = message.strip_prefix("route ``").unwrap_or(&message);
            format!("guard `{}`{problem}", self.guard)
        })
    }
}

impl Input {
    /// Every text the model would read, in order: the text prompt, each
    /// message's text parts (every role, tool results included), or the
    /// embedding texts. Images, audio, documents and earlier turns'
    /// reasoning are not text a guard can rewrite (reasoning is signed), so
    /// they are not here.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        let (text, chat, embedding) = match self {
            Input::Prompt(Prompt::Text(text)) => (Some(text), None, None),
            Input::Prompt(Prompt::Chat(messages)) => (None, Some(messages), None),
            Input::Embedding(texts) => (None, None, Some(texts)),
        };
        let parts = chat.into_iter().flatten().flat_map(|m| &m.parts);
        (text.into_iter())
            .chain(parts.filter_map(|part| match part {
                Part::Text(text) => Some(text),
                _ => None,
            }))
            .chain(embedding.into_iter().flatten())
            .map(String::as_str)
    }

    /// The texts of [`Input::texts`], to rewrite in place: the input keeps its
    /// kind and shape (the host refuses a rewrite that changes them).
    pub fn texts_mut(&mut self) -> impl Iterator<Item = &mut String> {
        let (text, chat, embedding) = match self {
            Input::Prompt(Prompt::Text(text)) => (Some(text), None, None),
            Input::Prompt(Prompt::Chat(messages)) => (None, Some(messages), None),
            Input::Embedding(texts) => (None, None, Some(texts)),
        };
        let parts = chat.into_iter().flatten().flat_map(|m| &mut m.parts);
        (text.into_iter())
            .chain(parts.filter_map(|part| match part {
                Part::Text(text) => Some(text),
                _ => None,
            }))
            .chain(embedding.into_iter().flatten())
    }
}

/// What a guard changed, counted by kind: what a rewrite reports.
///
/// The gateway records the counts with the invocation, so a kind names what
/// was found (`email`), never the text itself. A kind counted twice adds up;
/// a count of zero is no change, so that an empty `Changes` means "nothing
/// to rewrite" and the verdict stays [`RequestVerdict::Allow`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    list: Vec<Change>,
}

impl Changes {
    /// No changes.
    pub fn new() -> Self {
        Changes::default()
    }

    /// Counts `count` more changes of `kind`.
    pub fn add(&mut self, kind: &str, count: u32) {
        if count == 0 {
            return;
        }
        match self.list.iter_mut().find(|change| change.kind == kind) {
            Some(change) => change.count = change.count.saturating_add(count),
            None => self.list.push(Change {
                kind: kind.to_owned(),
                count,
            }),
        }
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// How many changes of `kind` were counted.
    pub fn count(&self, kind: &str) -> u32 {
        (self.list.iter())
            .find(|change| change.kind == kind)
            .map_or(0, |change| change.count)
    }

    /// The counts, in the order their kinds were first counted.
    pub fn iter(&self) -> impl Iterator<Item = &Change> {
        self.list.iter()
    }

    /// The counts as the verdict carries them.
    pub fn into_vec(self) -> Vec<Change> {
        self.list
    }
}

impl RequestVerdict {
    /// Refuses the request for `reason`, which the caller sees and the
    /// gateway records: name what was found, never quote it.
    pub fn deny(reason: impl Into<String>) -> Self {
        RequestVerdict::Deny(reason.into())
    }

    /// Sends `input` instead, reporting `changes`; [`RequestVerdict::Allow`]
    /// when nothing was counted, so that a guard that found nothing is not
    /// recorded as having rewritten the request.
    pub fn rewrite(input: Input, changes: Changes) -> Self {
        if changes.is_empty() {
            return RequestVerdict::Allow;
        }
        RequestVerdict::Rewrite(RequestRewrite {
            input,
            changes: changes.into_vec(),
        })
    }

    /// Calls `rewrite` on each of the input's texts ([`Input::texts_mut`]),
    /// which changes the text in place and counts what it changed; then
    /// [`RequestVerdict::rewrite`]. A text changed without counting is not
    /// sent when nothing at all was counted.
    pub fn rewrite_texts(
        mut input: Input,
        mut rewrite: impl FnMut(&mut String, &mut Changes),
    ) -> Self {
        let mut changes = Changes::new();
        for text in input.texts_mut() {
            rewrite(text, &mut changes);
        }
        RequestVerdict::rewrite(input, changes)
    }
}

impl AnswerVerdict {
    /// Refuses the answer for `reason`: name what was found, never quote it.
    pub fn deny(reason: impl Into<String>) -> Self {
        AnswerVerdict::Deny(reason.into())
    }

    /// Answers `texts` (one per choice, in the choices' order) instead,
    /// reporting `changes`; [`AnswerVerdict::Allow`] when nothing was
    /// counted.
    pub fn rewrite(texts: Vec<String>, changes: Changes) -> Self {
        if changes.is_empty() {
            return AnswerVerdict::Allow;
        }
        AnswerVerdict::Rewrite(AnswerRewrite {
            texts,
            changes: changes.into_vec(),
        })
    }

    /// Calls `rewrite` on each choice's text of `answer`, in order, then
    /// [`AnswerVerdict::rewrite`] with one text per choice.
    pub fn rewrite_texts(
        answer: Completion,
        mut rewrite: impl FnMut(&mut String, &mut Changes),
    ) -> Self {
        let mut changes = Changes::new();
        let mut texts: Vec<String> = answer.choices.into_iter().map(|c| c.text).collect();
        for text in &mut texts {
            rewrite(text, &mut changes);
        }
        AnswerVerdict::rewrite(texts, changes)
    }
}

/// Exports `$t` (a type implementing [`Guard`]) as the component's `guard`
/// world implementation: its `info`, `check-request` and `check-response`.
///
/// Invoke it once, at the top level of the guard's `cdylib` crate, and never
/// beside [`export_provider!`](crate::export_provider): a component is a
/// provider or a guard. See [the module](crate::guard) for an example.
#[macro_export]
macro_rules! export_guard {
    ($t:ty) => {
        const _: () = {
            type __GatewayGuardExport = $crate::guard::__bindings::Adapter<$t>;
            $crate::guard::__bindings::export!(
                __GatewayGuardExport with_types_in $crate::guard::__bindings
            );
        };
    };
}

/// The `guard` world's bindings, used by [`export_guard!`]; not part of the API.
///
/// The types it shares with the `provider` world (prompts, completions, the
/// plugin's info) and its imports (`log`, `kv`) are the provider bindings'
/// own, so there is one `Prompt` and one `Completion` in the SDK and the
/// helpers written for providers work on a guard's request.
#[doc(hidden)]
// The generated ABI glue takes one argument per flattened field of a request.
#[allow(clippy::too_many_arguments)]
pub mod __bindings {
    use super::PhantomData;

    wit_bindgen::generate!({
        world: "guard",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "gateway_plugin_sdk::guard::__bindings",
        additional_derives: [PartialEq],
        with: {
            "gateway:provider/types@0.2.0": crate::__private::gateway::provider::types,
            "gateway:provider/log@0.2.0": crate::__private::gateway::provider::log,
            "gateway:provider/kv@0.2.0": crate::__private::gateway::provider::kv,
        },
    });

    /// Bridges a [`super::Guard`] to the generated `Guest` trait.
    pub struct Adapter<T: ?Sized>(PhantomData<fn() -> T>);

    impl<T: super::Guard + ?Sized> Guest for Adapter<T> {
        fn info() -> PluginInfo {
            crate::__private::report_panics();
            T::info()
        }

        fn check_request(request: CheckedRequest) -> RequestVerdict {
            crate::__private::report_panics();
            T::check_request(request)
        }

        fn check_response(request: CheckedRequest, answer: Completion) -> AnswerVerdict {
            crate::__private::report_panics();
            T::check_response(request, answer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(input: Input) -> CheckedRequest {
        CheckedRequest {
            guard: "g".into(),
            settings: r#"{"word": "secret"}"#.into(),
            route: "r".into(),
            model: "m".into(),
            input,
            functions: Vec::new(),
            params: "{}".into(),
        }
    }

    fn chat() -> Input {
        let mut tool = Message::text_message(Role::Tool, "tool secret");
        tool.tool_call_id = Some("call_1".into());
        let mut assistant = Message::text_message(Role::Assistant, "a secret");
        assistant.parts.insert(
            0,
            Part::Reasoning(crate::Reasoning {
                text: "secret reasoning".into(),
                signature: Some("sig".into()),
                redacted: None,
            }),
        );
        Input::Prompt(Prompt::Chat(vec![
            Message::text_message(Role::System, "system"),
            Message {
                parts: vec![
                    Part::Text("one secret".into()),
                    Part::Image(crate::Image {
                        source: crate::Source::Url("https://x/secret.png".into()),
                        media_type: None,
                        detail: None,
                    }),
                    Part::Text("two".into()),
                ],
                ..Message::text_message(Role::User, "")
            },
            assistant,
            tool,
        ]))
    }

    /// Replaces `secret` with `[S]`, counting each as `word`.
    struct Words;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct Settings {
        word: String,
    }

    impl Guard for Words {
        fn info() -> PluginInfo {
            PluginInfo::new("words", "1", Vec::new())
        }

        fn check_request(request: CheckedRequest) -> RequestVerdict {
            let settings: Settings = request.settings().unwrap_or_else(|e| panic!("{e}"));
            RequestVerdict::rewrite_texts(request.input, |text, changes| {
                replace(text, &settings.word, changes);
            })
        }
    }

    fn replace(text: &mut String, word: &str, changes: &mut Changes) {
        let found = text.matches(word).count() as u32;
        if found > 0 {
            *text = text.replace(word, "[S]");
            changes.add("word", found);
        }
    }

    /// Only `info`: both checks allow.
    struct Nothing;

    impl Guard for Nothing {
        fn info() -> PluginInfo {
            PluginInfo::new("nothing", "1", Vec::new())
        }
    }

    #[test]
    fn texts_are_every_text_part_in_order() {
        let input = chat();
        let texts: Vec<&str> = input.texts().collect();
        assert_eq!(
            texts,
            ["system", "one secret", "two", "a secret", "tool secret"]
        );
        let prompt = Input::Prompt(Prompt::Text("p".into()));
        assert_eq!(prompt.texts().collect::<Vec<_>>(), ["p"]);
        let embedding = Input::Embedding(vec!["a".into(), "b".into()]);
        assert_eq!(embedding.texts().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn rewrite_texts_changes_text_parts_only_and_counts() {
        let verdict = Words::check_request(request(chat()));
        let RequestVerdict::Rewrite(rewrite) = verdict else {
            panic!("{verdict:?}");
        };
        assert_eq!(
            rewrite.changes,
            [Change {
                kind: "word".into(),
                count: 3
            }]
        );
        let texts: Vec<&str> = rewrite.input.texts().collect();
        assert_eq!(texts, ["system", "one [S]", "two", "a [S]", "tool [S]"]);
        let Input::Prompt(Prompt::Chat(messages)) = &rewrite.input else {
            panic!("the input changed kind");
        };
        // What is not text stays as it was: the image's URL, the signed reasoning.
        assert_eq!(messages[1].parts.len(), 3);
        assert!(matches!(&messages[1].parts[1], Part::Image(image)
            if image.source == crate::Source::Url("https://x/secret.png".into())));
        assert!(
            matches!(&messages[2].parts[0], Part::Reasoning(r) if r.text == "secret reasoning")
        );
        assert_eq!(messages[3].tool_call_id.as_deref(), Some("call_1"));
    }

    #[test]
    fn rewrite_of_embeddings_keeps_their_number() {
        let input = Input::Embedding(vec!["secret".into(), "x".into(), "secret secret".into()]);
        let verdict = Words::check_request(request(input));
        assert_eq!(
            verdict,
            RequestVerdict::Rewrite(RequestRewrite {
                input: Input::Embedding(vec!["[S]".into(), "x".into(), "[S] [S]".into()]),
                changes: vec![Change {
                    kind: "word".into(),
                    count: 3
                }],
            })
        );
    }

    #[test]
    fn nothing_found_is_allow_not_a_rewrite() {
        let input = Input::Prompt(Prompt::Text("harmless".into()));
        assert_eq!(Words::check_request(request(input)), RequestVerdict::Allow);
        let answer = Completion {
            model: "m".into(),
            choices: Vec::new(),
            usage: None,
        };
        assert_eq!(
            AnswerVerdict::rewrite_texts(answer, |_, _| {}),
            AnswerVerdict::Allow
        );
    }

    #[test]
    fn default_checks_allow() {
        let input = Input::Prompt(Prompt::Text("secret".into()));
        assert_eq!(
            Nothing::check_request(request(input.clone())),
            RequestVerdict::Allow
        );
        let answer = Completion {
            model: "m".into(),
            choices: Vec::new(),
            usage: None,
        };
        assert_eq!(
            Nothing::check_response(request(input), answer),
            AnswerVerdict::Allow
        );
        assert_eq!(Nothing::info().name, "nothing");
    }

    #[test]
    fn answer_rewrite_has_one_text_per_choice() {
        let choice = |index: u32, text: &str| Choice {
            index,
            text: text.into(),
            reasoning: Vec::new(),
            finish_reason: Some(FinishReason::Stop),
            function_call: None,
            tool_calls: Vec::new(),
            logprobs: None,
        };
        let answer = Completion {
            model: "m".into(),
            choices: vec![choice(0, "a secret"), choice(1, "none"), choice(2, "")],
            usage: None,
        };
        let verdict =
            AnswerVerdict::rewrite_texts(answer, |text, changes| replace(text, "secret", changes));
        assert_eq!(
            verdict,
            AnswerVerdict::Rewrite(AnswerRewrite {
                texts: vec!["a [S]".into(), "none".into(), String::new()],
                changes: vec![Change {
                    kind: "word".into(),
                    count: 1
                }],
            })
        );
    }

    #[test]
    fn changes_add_up_by_kind_and_ignore_zero() {
        let mut changes = Changes::new();
        changes.add("email", 0);
        assert!(changes.is_empty());
        changes.add("email", 2);
        changes.add("card", 1);
        changes.add("email", 1);
        assert_eq!(changes.count("email"), 3);
        assert_eq!(changes.count("iban"), 0);
        let kinds: Vec<&str> = changes.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(kinds, ["email", "card"]);
        assert_eq!(
            RequestVerdict::rewrite(Input::Embedding(Vec::new()), Changes::new()),
            RequestVerdict::Allow
        );
        assert_eq!(
            RequestVerdict::deny("no"),
            RequestVerdict::Deny("no".into())
        );
        assert_eq!(AnswerVerdict::deny("no"), AnswerVerdict::Deny("no".into()));
    }

    #[test]
    fn settings_name_the_guard_and_the_setting() {
        let mut checked = request(Input::Embedding(Vec::new()));
        checked.settings = r#"{"word": 1}"#.into();
        assert_eq!(
            checked.settings::<Settings>().err().as_deref(),
            Some("guard `g`: setting `word`: invalid type: integer `1`, expected a string")
        );
        checked.settings = r#"{"wrod": "x"}"#.into();
        let error = checked.settings::<Settings>().unwrap_err();
        assert!(
            error.starts_with("guard `g`: setting `wrod`: unknown field `wrod`"),
            "{error}"
        );
        checked.settings = "[]".into();
        assert_eq!(
            checked.settings::<Settings>().err().as_deref(),
            Some("guard `g`: settings must be a JSON object")
        );
        checked.settings = String::new();
        assert_eq!(
            checked.settings::<Settings>().err().as_deref(),
            Some("guard `g`: settings: missing field `word`")
        );
    }

    #[test]
    #[should_panic(expected = "guard `g`: setting `word`")]
    fn bad_settings_trap() {
        let mut checked = request(Input::Embedding(Vec::new()));
        checked.settings = r#"{"word": true}"#.into();
        Words::check_request(checked);
    }
}
