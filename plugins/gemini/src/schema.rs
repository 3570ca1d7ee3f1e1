//! JSON Schema, as callers write function parameters (OpenAI style), to the OpenAPI 3.0 subset
//! Gemini's `Schema` object accepts.
//!
//! Gemini answers 400 for any key it does not know (`additionalProperties`, `$schema`, `$ref`,
//! `const`, ...), so the schema is rebuilt from the keys Gemini understands instead of being
//! forwarded. Local `$ref`s are inlined, `const` becomes a one-value `enum`, `type: [T, "null"]`
//! and `anyOf: [..., {"type": "null"}]` become `nullable`, `oneOf` becomes `anyOf`, `allOf`
//! members are merged. Types are written in Gemini's canonical upper case.

use serde_json::{Map, Value, json};

/// Keys copied as they are: Gemini's `Schema` has them with JSON Schema's meaning.
const COPIED: &[&str] = &[
    "title",
    "description",
    "enum",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "example",
    "default",
    "propertyOrdering",
];

/// The `format` values Gemini accepts; others (`email`, `uri`, ...) are dropped.
const FORMATS: &[&str] = &["date-time", "enum", "float", "double", "int32", "int64"];

/// How deep `$ref`s and nesting are followed; deeper parts constrain nothing. Bounds recursive
/// definitions, which cannot be expressed without references anyway.
const MAX_DEPTH: usize = 32;

/// The parameters of a function declaration: `None` when the schema declares no parameter,
/// because Gemini rejects an `OBJECT` without properties but accepts a declaration without
/// `parameters`.
pub fn parameters(schema: &Value) -> Option<Value> {
    let converted = convert(schema);
    let declares_nothing = converted.get("properties").is_none()
        && converted.get("anyOf").is_none()
        && converted
            .get("type")
            .is_none_or(|t| t.as_str() == Some("OBJECT"));
    (!declares_nothing).then_some(converted)
}

/// Converts a JSON Schema to a Gemini schema.
pub fn convert(schema: &Value) -> Value {
    Value::Object(node(schema, schema, 0))
}

fn node(schema: &Value, root: &Value, depth: usize) -> Map<String, Value> {
    let mut out = Map::new();
    // `true`, `false` and non-schemas constrain nothing Gemini can express.
    let Value::Object(map) = schema else {
        return out;
    };
    if depth > MAX_DEPTH {
        return out;
    }
    if let Some(reference) = map.get("$ref") {
        let target = reference
            .as_str()
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|pointer| root.pointer(pointer));
        if let Some(target) = target {
            out = node(target, root, depth + 1);
        }
        // Keywords beside a `$ref` (usually a description) refine the referenced schema.
    }

    let mut nullable = map.get("nullable") == Some(&Value::Bool(true));
    match map.get("type") {
        Some(Value::String(kind)) if kind == "null" => nullable = true,
        Some(Value::String(kind)) => {
            out.insert("type".into(), upper(kind));
        }
        Some(Value::Array(kinds)) => {
            let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            nullable |= kinds.contains(&"null");
            let kinds: Vec<&str> = kinds.into_iter().filter(|k| *k != "null").collect();
            match kinds.as_slice() {
                [] => {}
                [kind] => {
                    out.insert("type".into(), upper(kind));
                }
                several => {
                    out.insert(
                        "anyOf".into(),
                        several.iter().map(|k| json!({"type": upper(k)})).collect(),
                    );
                }
            }
        }
        _ => {}
    }

    for key in COPIED {
        if let Some(value) = map.get(*key) {
            out.insert((*key).into(), value.clone());
        }
    }
    if let Some(format) = map.get("format").and_then(Value::as_str)
        && FORMATS.contains(&format)
    {
        out.insert("format".into(), json!(format));
    }
    if let Some(value) = map.get("const")
        && !out.contains_key("enum")
    {
        out.insert("enum".into(), json!([value]));
        if value.is_string() && !out.contains_key("type") {
            out.insert("type".into(), json!("STRING"));
        }
    }

    if let Some(Value::Object(properties)) = map.get("properties")
        && !properties.is_empty()
    {
        let converted: Map<String, Value> = properties
            .iter()
            .map(|(name, property)| (name.clone(), Value::Object(node(property, root, depth + 1))))
            .collect();
        // Gemini refuses `required` names that are not properties.
        if let Some(Value::Array(required)) = map.get("required") {
            let required: Vec<Value> = required
                .iter()
                .filter(|name| name.as_str().is_some_and(|n| converted.contains_key(n)))
                .cloned()
                .collect();
            if !required.is_empty() {
                out.insert("required".into(), Value::Array(required));
            }
        }
        out.insert("properties".into(), Value::Object(converted));
    }

    let items = match map.get("items") {
        Some(Value::Array(tuple)) => tuple.first(),
        other => other,
    };
    if let Some(items) = items {
        out.insert("items".into(), Value::Object(node(items, root, depth + 1)));
    }

    if let Some(Value::Array(variants)) = map.get("anyOf").or_else(|| map.get("oneOf")) {
        let mut converted = Vec::new();
        for variant in variants {
            if is_null(variant) {
                nullable = true;
            } else {
                converted.push(node(variant, root, depth + 1));
            }
        }
        if converted.len() == 1 {
            // `anyOf: [X, null]` is just a nullable X.
            merge(&mut out, converted.remove(0));
        } else if !converted.is_empty() {
            out.insert(
                "anyOf".into(),
                converted.into_iter().map(Value::Object).collect(),
            );
        }
    }
    if let Some(Value::Array(members)) = map.get("allOf") {
        for member in members {
            merge(&mut out, node(member, root, depth + 1));
        }
    }

    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    out
}

fn upper(kind: &str) -> Value {
    Value::String(kind.to_ascii_uppercase())
}

fn is_null(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// Adds `from`'s keys that `into` lacks (the schema's own keywords win).
fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (key, value) in from {
        into.entry(key).or_insert(value);
    }
}
