//! Function schemas in the subset of OpenAPI Gemini takes.

use super::*;

#[test]
fn schemas_keep_what_gemini_knows() {
    let converted = schema::convert(&json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "title": "Args",
        "properties": {
            "name": {"type": "string", "minLength": 1, "format": "email", "examples": ["x"]},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
            "mode": {"const": "fast"},
            "note": {"type": ["string", "null"]},
            "size": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
            "either": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "multi": {"type": ["string", "integer"]},
            "pair": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]}
        },
        "required": ["name", "ghost"],
        "additionalProperties": false
    }));
    assert_eq!(
        converted,
        json!({
            "type": "OBJECT",
            "title": "Args",
            "properties": {
                "name": {"type": "STRING", "minLength": 1},
                "when": {"type": "STRING", "format": "date-time"},
                "tags": {"type": "ARRAY", "items": {"type": "STRING", "enum": ["a", "b"]}, "maxItems": 3},
                "mode": {"type": "STRING", "enum": ["fast"]},
                "note": {"type": "STRING", "nullable": true},
                "size": {"type": "INTEGER", "minimum": 0, "nullable": true},
                "either": {"anyOf": [{"type": "STRING"}, {"type": "NUMBER"}]},
                "multi": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]},
                "pair": {"type": "ARRAY", "items": {"type": "NUMBER"}}
            },
            "required": ["name"]
        })
    );
}

#[test]
fn schema_references_are_inlined() {
    let converted = schema::convert(&json!({
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/Address", "description": "where they live"},
            "work": {"allOf": [{"$ref": "#/definitions/Address"}]},
            "missing": {"$ref": "#/$defs/Nope"},
            "remote": {"$ref": "https://example.com/schema.json"}
        },
        "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}, "description": "an address"}},
        "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}}
    }));
    assert_eq!(
        converted["properties"],
        json!({
            "home": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "description": "where they live"},
            "work": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}},
            "missing": {},
            "remote": {}
        })
    );
}

#[test]
fn recursive_schemas_are_cut_off() {
    let converted = schema::convert(&json!({
        "$ref": "#/$defs/Node",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}
    }));
    // Bounded depth: the conversion ends, and the outer levels are intact.
    assert_eq!(converted["type"], json!("OBJECT"));
    assert_eq!(converted["properties"]["next"]["type"], json!("OBJECT"));
    assert_eq!(schema::convert(&json!(true)), json!({}));
}
