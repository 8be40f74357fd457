//! How attribute values keep their OTLP type in the `spans` and `logs` tables (`schema.rs`,
//! migration 6), and how they read back as JSON. `otlp` writes them; the API reads them.
//!
//! Two forms, both plain text on ClickHouse 18.16 and current servers:
//! - a top-level attribute: its text in `*_values` (a string as itself, a bool as
//!   `true`/`false`, a number in decimal, bytes as hex, an array or map as JSON) and its type
//!   in the parallel `*_types` ([`value_type`]); a row stored before types were kept has no
//!   types, and its values read as strings;
//! - an attribute list inside a list (an event's, a link's, a scope's) and a structured log
//!   body: the OTLP/JSON form of its KeyValues or AnyValue (`{"stringValue":…}`,
//!   `{"intValue":…}`, `{"bytesValue":<base64>}`, `{"arrayValue":{"values":[…]}}`,
//!   `{"kvlistValue":{"values":[{"key":…,"value":…}]}}`), lossless and in order.

use serde_json::{Map, Value};

/// The type of a value, as the `*_types` columns and `logs.body_type` keep it.
pub mod value_type {
    /// No value (an empty AnyValue, or none at all).
    pub const EMPTY: u8 = 0;
    pub const STRING: u8 = 1;
    pub const BOOL: u8 = 2;
    pub const INT: u8 = 3;
    pub const DOUBLE: u8 = 4;
    pub const BYTES: u8 = 5;
    pub const ARRAY: u8 = 6;
    pub const MAP: u8 = 7;
}

/// A top-level value as JSON, from its text and its type (`None`: a row stored before types
/// were kept, read as a string).
pub fn typed_value(kind: Option<u8>, text: &str) -> Value {
    use value_type::*;
    let Some(kind) = kind else { return Value::String(text.to_string()) };
    let parsed = match kind {
        EMPTY => Some(Value::Null),
        BOOL => Some(Value::Bool(text == "true")),
        INT => text.parse::<i64>().ok().map(Value::from),
        // A double's text is serde_json's; NaN and the infinities were written as `null`.
        DOUBLE | ARRAY | MAP => serde_json::from_str(text).ok(),
        _ => None,
    };
    parsed.unwrap_or_else(|| Value::String(text.to_string()))
}

/// Top-level attributes as a JSON object of typed values (a repeated key: the last wins).
pub fn typed_attributes(keys: &[String], values: &[String], types: &[u8]) -> Map<String, Value> {
    let typed = types.len() == values.len();
    keys.iter()
        .zip(values)
        .enumerate()
        .map(|(i, (k, v))| (k.clone(), typed_value(typed.then(|| types[i]), v)))
        .collect()
}

/// An OTLP/JSON KeyValue list (`''`: none) as a JSON object of plain values.
pub fn attribute_list(json: &str) -> Map<String, Value> {
    if json.is_empty() {
        return Map::new();
    }
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(json) else { return Map::new() };
    items
        .iter()
        .filter_map(|kv| Some((kv.get("key")?.as_str()?.to_string(), plain(kv.get("value").unwrap_or(&Value::Null)))))
        .collect()
}

/// An OTLP/JSON AnyValue as the plain JSON value it stands for: numbers as numbers, arrays
/// and maps as JSON arrays and objects, bytes as their base64 text.
pub fn plain(any: &Value) -> Value {
    let Some(object) = any.as_object() else { return Value::Null };
    let Some((kind, inner)) = object.iter().next() else { return Value::Null };
    match kind.as_str() {
        "intValue" => match inner {
            Value::String(s) => s.parse::<i64>().map_or_else(|_| inner.clone(), Value::from),
            other => other.clone(),
        },
        "arrayValue" => Value::Array(
            inner.get("values").and_then(Value::as_array).map_or(&[][..], Vec::as_slice).iter().map(plain).collect(),
        ),
        "kvlistValue" => Value::Object(
            inner
                .get("values")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .filter_map(|kv| {
                    Some((kv.get("key")?.as_str()?.to_string(), plain(kv.get("value").unwrap_or(&Value::Null))))
                })
                .collect(),
        ),
        _ => inner.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_typed_value_reads_back_as_its_json() {
        use value_type::*;
        assert_eq!(typed_value(Some(INT), "-42"), json!(-42));
        assert_eq!(typed_value(Some(DOUBLE), "2.5"), json!(2.5));
        assert_eq!(typed_value(Some(BOOL), "true"), json!(true));
        assert_eq!(typed_value(Some(ARRAY), "[1,\"a\"]"), json!([1, "a"]));
        assert_eq!(typed_value(Some(MAP), "{\"a\":{\"b\":1}}"), json!({"a": {"b": 1}}));
        assert_eq!(typed_value(Some(STRING), "42"), json!("42"), "a string of digits stays a string");
        assert_eq!(typed_value(None, "42"), json!("42"), "rows stored before types were kept");
        assert_eq!(typed_value(Some(EMPTY), ""), Value::Null);
    }

    #[test]
    fn untyped_rows_read_every_value_as_a_string() {
        let keys = ["a".to_string(), "b".to_string()];
        let values = ["1".to_string(), "x".to_string()];
        assert_eq!(Value::Object(typed_attributes(&keys, &values, &[])), json!({"a": "1", "b": "x"}));
        assert_eq!(
            Value::Object(typed_attributes(&keys, &values, &[value_type::INT, value_type::STRING])),
            json!({"a": 1, "b": "x"})
        );
    }

    #[test]
    fn an_otlp_json_list_reads_as_plain_values() {
        let list = r#"[{"key":"n","value":{"intValue":"7"}},{"key":"m","value":{"kvlistValue":{"values":[{"key":"x","value":{"arrayValue":{"values":[{"doubleValue":1.5},{"boolValue":false}]}}}]}}},{"key":"e","value":{}}]"#;
        assert_eq!(Value::Object(attribute_list(list)), json!({"n": 7, "m": {"x": [1.5, false]}, "e": null}));
        assert!(attribute_list("").is_empty());
    }
}
