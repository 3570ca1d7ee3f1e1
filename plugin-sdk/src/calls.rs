//! Function calls in a conversation: what every provider's mapping of a chat
//! needs, whatever its wire format.

use serde_json::{Value, json};

use crate::{FunctionDef, Message, ProviderError, ToolCall};

impl Message {
    /// The calls an assistant message makes: its `tool_calls`, else its legacy
    /// `function_call` (as a call without an id). Commonbase clients echo
    /// `function_call` = the first tool call, so tool calls win when both are
    /// there.
    pub fn calls(&self) -> Vec<ToolCall> {
        if !self.tool_calls.is_empty() {
            return self.tool_calls.clone();
        }
        self.function_call
            .iter()
            .map(|call| ToolCall {
                id: String::new(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })
            .collect()
    }
}

impl ToolCall {
    /// The arguments as a JSON object, the form most APIs want them in; empty
    /// arguments are `{}`. `None` when they are anything but an object.
    pub fn arguments_object(&self) -> Option<Value> {
        if self.arguments.trim().is_empty() {
            return Some(json!({}));
        }
        match serde_json::from_str(&self.arguments) {
            Ok(object @ Value::Object(_)) => Some(object),
            _ => None,
        }
    }
}

impl FunctionDef {
    /// The function's `parameters` JSON Schema, `None` when it has none (or
    /// only whitespace). `position` is the function's index in the request,
    /// for the error: [`ProviderError::InvalidRequest`] naming
    /// `functions[position].parameters` when it is not valid JSON.
    pub fn schema(&self, position: usize) -> Result<Option<Value>, ProviderError> {
        match self.parameters.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(text) => serde_json::from_str(text).map(Some).map_err(|e| {
                ProviderError::InvalidRequest(format!(
                    "functions[{position}].parameters is not valid JSON: {e}"
                ))
            }),
        }
    }

    /// The function's `parameters` as a JSON Schema object with a `type` (`"object"` when it
    /// names none; `{"type": "object"}` for no parameters), as APIs that require an object
    /// schema take it (Anthropic's, Bedrock's); refused as [`FunctionDef::schema`] refuses, or
    /// when the schema is not an object.
    pub fn object_schema(&self, position: usize) -> Result<Value, ProviderError> {
        let mut schema = match self.schema(position)? {
            None => serde_json::Map::new(),
            Some(Value::Object(schema)) => schema,
            Some(_) => {
                return Err(ProviderError::InvalidRequest(format!(
                    "functions[{position}].parameters must be a JSON Schema object"
                )));
            }
        };
        schema.entry("type").or_insert_with(|| "object".into());
        Ok(Value::Object(schema))
    }

    /// The function's description, `None` when it has none or an empty one.
    pub fn description(&self) -> Option<String> {
        self.description.clone().filter(|d| !d.is_empty())
    }
}

/// A call of an assistant message: its id and the function's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCall {
    /// The call's id; empty when neither the caller nor the plugin gave one.
    pub id: String,
    /// The called function's name; empty when unknown.
    pub name: String,
}

/// The calls of the latest assistant message that no tool or function result
/// has answered yet: how a plugin pairs results with calls when the caller
/// leaves out ids or names.
///
/// ```
/// use gateway_plugin_sdk::{OpenCall, OpenCalls};
///
/// let call = |id: &str, name: &str| OpenCall { id: id.into(), name: name.into() };
/// let mut open = OpenCalls::new();
/// open.replace([call("a", "weather"), call("b", "time")]);
/// // A result naming its function answers that function's first open call.
/// assert_eq!(open.answer(None, Some("time")), Some(call("b", "time")));
/// // One naming nothing answers the first open call.
/// assert_eq!(open.answer(None, None), Some(call("a", "weather")));
/// assert_eq!(open.answer(None, None), None);
/// // An id is used as given.
/// assert_eq!(open.answer(Some("z"), None), Some(call("z", "")));
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenCalls {
    calls: Vec<OpenCall>,
}

impl OpenCalls {
    /// No open calls.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts over with the calls of a new assistant message, in order.
    pub fn replace(&mut self, calls: impl IntoIterator<Item = OpenCall>) {
        self.calls.clear();
        self.calls.extend(calls);
    }

    /// The call a result answers, no longer open afterwards:
    /// - with a non-empty `id`: that id, with the name of the open call that
    ///   has it (else an empty name);
    /// - without: the first open call named `name`, or the first open call at
    ///   all when `name` is missing or empty; `None` when there is none.
    pub fn answer(&mut self, id: Option<&str>, name: Option<&str>) -> Option<OpenCall> {
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            let name = match self.calls.iter().position(|call| call.id == id) {
                Some(position) => self.calls.remove(position).name,
                None => String::new(),
            };
            return Some(OpenCall {
                id: id.to_owned(),
                name,
            });
        }
        let position = match name.filter(|name| !name.is_empty()) {
            Some(name) => self.calls.iter().position(|call| call.name == name)?,
            None if self.calls.is_empty() => return None,
            None => 0,
        };
        Some(self.calls.remove(position))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FunctionCall, Role};

    fn message(tool_calls: Vec<ToolCall>, function_call: Option<FunctionCall>) -> Message {
        Message {
            role: Role::Assistant,
            parts: Vec::new(),
            name: None,
            function_call,
            tool_calls,
            tool_call_id: None,
            is_error: false,
        }
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn calls_prefer_tool_calls_over_the_function_call() {
        let function = FunctionCall {
            name: "f".into(),
            arguments: "{}".into(),
        };
        assert_eq!(
            message(vec![call("1", "t", "")], Some(function.clone())).calls(),
            [call("1", "t", "")]
        );
        assert_eq!(
            message(Vec::new(), Some(function)).calls(),
            [call("", "f", "{}")]
        );
        assert!(message(Vec::new(), None).calls().is_empty());
    }

    #[test]
    fn arguments_as_an_object() {
        assert_eq!(call("", "", " ").arguments_object(), Some(json!({})));
        assert_eq!(
            call("", "", r#"{"a":1}"#).arguments_object(),
            Some(json!({"a": 1}))
        );
        assert_eq!(call("", "", "[1]").arguments_object(), None);
        assert_eq!(call("", "", "{").arguments_object(), None);
    }

    #[test]
    fn schemas() {
        let def = |parameters: Option<&str>| FunctionDef {
            name: "f".into(),
            description: None,
            parameters: parameters.map(str::to_owned),
        };
        assert_eq!(def(None).schema(0), Ok(None));
        assert_eq!(def(Some("  ")).schema(0), Ok(None));
        assert_eq!(
            def(Some(r#"{"type":"object"}"#)).schema(0),
            Ok(Some(json!({"type": "object"})))
        );
        match def(Some("{")).schema(3) {
            Err(ProviderError::InvalidRequest(m)) => {
                assert!(
                    m.starts_with("functions[3].parameters is not valid JSON"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_answered_id_closes_its_call() {
        let open_call = |id: &str, name: &str| OpenCall {
            id: id.into(),
            name: name.into(),
        };
        let mut open = OpenCalls::new();
        open.replace([open_call("a", "f"), open_call("b", "f")]);
        assert_eq!(
            open.answer(Some("b"), Some("ignored")),
            Some(open_call("b", "f"))
        );
        assert_eq!(open.answer(None, Some("f")), Some(open_call("a", "f")));
        assert_eq!(open.answer(None, Some("f")), None);
        // A new assistant message forgets the calls of the previous one.
        open.replace([open_call("c", "g")]);
        open.replace([]);
        assert_eq!(open.answer(None, None), None);
        // An empty name is no name.
        open.replace([open_call("d", "h")]);
        assert_eq!(open.answer(Some(""), Some("")), Some(open_call("d", "h")));
    }
}
