//! What the OpenAPI document states beyond each handler's own annotations, so that it is the
//! whole of what the server enforces (docs/api.md, "The contract"): the rule every text
//! parameter passes (`params::text`), each list's cursor pattern, each read's window rule (in
//! `from`'s description and, machine-readable, as `x-tayga-window`), unsigned 64-bit
//! numbers as such, unique operation ids, links from a list to what it lists, the bearer
//! token when one is required, and the answers every route may give (401, 403 for a write,
//! 503's `Retry-After`) with their JSON bodies. These rules live here once rather than on each of the dozens of fields they
//! apply to; the handlers' annotations hold what is particular to one parameter.

#[cfg(test)]
use serde_json::Map;
use serde_json::{json, Value};

use super::error::RETRY_AFTER_SECS;
use super::handlers::{deliveries, logs, pipeline, services, shapes, stories, templates, traces};
use super::params::{CursorKey, WindowRule, MAX_TEXT_CHARS, TEXT_PATTERN};

/// A path's window rule and the pattern of the cursor its list takes.
struct PathRules {
    path: &'static str,
    window: Option<WindowRule>,
    cursor: Option<&'static str>,
}

/// Every path with a window or a cursor: the rule its handler passes to `params::window`
/// and the key type it reads the cursor as.
const PATHS: &[PathRules] = &[
    PathRules { path: "/api/v1/services", window: Some(services::WINDOW), cursor: Some(String::PATTERN) },
    PathRules { path: "/api/v1/traces", window: Some(traces::WINDOW), cursor: Some(<(u64, String)>::PATTERN) },
    PathRules { path: "/api/v1/traces/scatter", window: Some(traces::WINDOW), cursor: None },
    PathRules { path: "/api/v1/shapes", window: Some(stories::WINDOW), cursor: Some(<(u64, u64)>::PATTERN) },
    PathRules {
        path: "/api/v1/shapes/{fingerprint}/stories",
        window: Some(stories::WINDOW),
        cursor: Some(<(u64, String)>::PATTERN),
    },
    PathRules { path: "/api/v1/shapes/{a}/diff/{b}", window: Some(shapes::WINDOW), cursor: None },
    PathRules { path: "/api/v1/logs", window: Some(logs::WINDOW), cursor: Some(<(u64, u64)>::PATTERN) },
    PathRules { path: "/api/v1/logs/counts", window: Some(logs::WINDOW), cursor: None },
    PathRules {
        path: "/api/v1/templates",
        window: Some(templates::WINDOW),
        cursor: Some(<(u64, String, u64)>::PATTERN),
    },
    PathRules { path: "/api/v1/alerts", window: None, cursor: Some(<(u64, u64)>::PATTERN) },
    PathRules { path: "/api/v1/deliveries", window: Some(deliveries::WINDOW), cursor: Some(<(u64, String)>::PATTERN) },
    PathRules { path: "/api/v1/pipeline", window: Some(pipeline::WINDOW), cursor: None },
];

/// Where an answer's values are another operation's parameters (OpenAPI links): a client
/// and a fuzzer follow them from a list to what it lists.
type Link = (&'static str, &'static str, &'static str, &'static str, &'static [(&'static str, &'static str)]);
const LINKS: &[Link] = &[
    (
        "/api/v1/logs",
        "get",
        "context",
        "logs_context",
        &[
            ("log_id", "$response.body#/items/0/log_id"),
            ("service", "$response.body#/items/0/service"),
            ("time_ns", "$response.body#/items/0/time_ns"),
        ],
    ),
    (
        "/api/v1/shapes",
        "get",
        "diff",
        "stories_diff",
        &[("a", "$response.body#/items/0/fingerprint"), ("b", "$response.body#/items/1/fingerprint")],
    ),
];

/// The document as `utoipa` made it from the annotations, with the shared rules stated.
/// `token_required`: every request needs a bearer token (docs/security.md).
pub fn state(doc: utoipa::openapi::OpenApi, token_required: bool) -> Value {
    let mut doc = serde_json::to_value(doc).expect("the OpenAPI document is JSON");
    let error = json!({"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}});
    let Some(paths) = doc["paths"].as_object_mut() else { return doc };
    for (path, item) in paths.iter_mut() {
        let rules = PATHS.iter().find(|r| r.path == path);
        let Some(methods) = item.as_object_mut() else { continue };
        for (method, operation) in methods.iter_mut() {
            if let Some(params) = operation["parameters"].as_array_mut() {
                for param in params.iter_mut() {
                    state_parameter(param, rules);
                }
            }
            // utoipa names an operation after its function, and six are `list`: the document
            // needs each name once (a generated client's method names).
            let tag = operation["tags"][0].as_str().unwrap_or("api").to_string();
            if let Some(id) = operation["operationId"].as_str().map(str::to_string) {
                operation["operationId"] = json!(format!("{tag}_{id}"));
            }
            if let Some(window) = rules.and_then(|r| r.window) {
                operation["x-tayga-window"] = json!({"default_ns": window.default_ns, "max_ns": window.max_ns});
            }
            let responses = operation["responses"].as_object_mut().expect("every operation has responses");
            if token_required {
                responses.entry("401").or_insert_with(|| {
                    json!({"description": "No token, or one that is not known", "content": error,
                        "headers": {"WWW-Authenticate": {"schema": {"type": "string", "enum": ["Bearer"]}}}})
                });
            }
            if let Some(unavailable) = responses.get_mut("503") {
                unavailable["headers"] = json!({"Retry-After": {
                    "description": "Seconds to wait before asking again",
                    "schema": {"type": "integer", "enum": [RETRY_AFTER_SECS]}}});
            }
            if token_required && method != "get" {
                responses.entry("403").or_insert_with(|| {
                    json!({"description": "A viewer's token or session: a write needs an operator's", "content": error})
                });
            }
        }
    }
    for (path, method, link, target, parameters) in LINKS {
        if let Some(ok) = doc["paths"][*path][*method]["responses"]["200"].as_object_mut() {
            let parameters: serde_json::Map<String, Value> =
                parameters.iter().map(|(name, from)| (name.to_string(), json!(from))).collect();
            ok.entry("links").or_insert_with(|| json!({}))[*link] =
                json!({"operationId": target, "parameters": parameters});
        }
    }
    unsigned(&mut doc);
    if token_required {
        doc["components"]["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer"}});
        doc["security"] = json!([{"bearer": []}]);
    }
    doc
}

/// One parameter with the shared rules: text, cursor, window.
fn state_parameter(param: &mut Value, rules: Option<&PathRules>) {
    let name = param["name"].as_str().unwrap_or_default().to_string();
    let in_query = param["in"] == "query";
    let schema = param["schema"].as_object_mut();
    let Some(schema) = schema else { return };
    // utoipa writes a u64 as a signed `int64` with `minimum: 0`; the server reads the whole
    // unsigned range, so the document says so (a larger number is a 400).
    if in_query && schema.get("type") == Some(&json!("integer")) && schema.get("format") == Some(&json!("int64")) {
        schema.insert("format".into(), json!("uint64"));
        schema.entry("maximum").or_insert_with(|| json!(u64::MAX));
    }
    if in_query && schema.get("type") == Some(&json!("string")) {
        // Every text query parameter goes through `params::text` first.
        schema.insert("maxLength".into(), json!(MAX_TEXT_CHARS));
        schema.entry("pattern").or_insert_with(|| json!(TEXT_PATTERN));
    }
    if name == "cursor" {
        if let Some(pattern) = rules.and_then(|r| r.cursor) {
            schema.insert("pattern".into(), json!(pattern));
        }
        append(param, "Opaque: `next_cursor` of the previous page, as it was given.");
    }
    if name == "from" {
        if let Some(window) = rules.and_then(|r| r.window) {
            append(param, &window.describe());
        }
    }
}

/// utoipa writes every u64 field of an answer as a signed `int64` with `minimum: 0`; the
/// server sends the whole unsigned range (a span stored with an end near `u64::MAX` has
/// such a duration), so each says `uint64`.
fn unsigned(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("format") == Some(&json!("int64")) && map.get("minimum") == Some(&json!(0)) {
                map.insert("format".into(), json!("uint64"));
            }
            map.values_mut().for_each(unsigned);
        }
        Value::Array(items) => items.iter_mut().for_each(unsigned),
        _ => {}
    }
}

/// `text` added to a parameter's description.
fn append(param: &mut Value, text: &str) {
    let Some(param) = param.as_object_mut() else { return };
    let description = match param.get("description").and_then(Value::as_str) {
        Some(old) if !old.is_empty() => format!("{old}\n\n{text}"),
        _ => text.to_string(),
    };
    param.insert("description".into(), Value::String(description));
}

/// Every `$ref` in `value` (the schemas the document must define).
pub fn references(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                into.push(r.clone());
            }
            map.values().for_each(|v| references(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, into)),
        _ => {}
    }
}

/// The parameters of `method` on `path` by name.
#[cfg(test)]
fn parameters(doc: &Value, path: &str, method: &str) -> Map<String, Value> {
    doc["paths"][path][method]["parameters"]
        .as_array()
        .map(|ps| ps.iter().map(|p| (p["name"].as_str().unwrap().to_string(), p.clone())).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::api::params::{HEX_ID_PATTERN, TRACE_ID_PATTERN};
    use crate::wire::alert::AlertKind;

    fn doc(token_required: bool) -> Value {
        let app = crate::daemon::api::handlers::AppState {
            store: crate::store::Store::new(&crate::config::ClickHouseConfig::default()),
            query_timeout: std::time::Duration::from_secs(1),
            now_ns: crate::store::now_ns,
            alerts_topic: None,
        };
        state(crate::daemon::api::router::api_routes(app).1, token_required)
    }

    #[test]
    fn every_reference_is_defined() {
        let doc = doc(true);
        let mut refs = Vec::new();
        references(&doc, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{r}"));
            assert!(doc["components"]["schemas"].get(name).is_some(), "{r} is not defined");
        }
    }

    #[test]
    fn every_parameter_states_its_rule() {
        let doc = doc(true);
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let params = parameters(&doc, path, method);
                for (name, p) in &params {
                    let schema = &p["schema"];
                    let what = format!("{method} {path} {name}");
                    match (p["in"].as_str().unwrap(), schema["type"].as_str()) {
                        ("path", _) if name == "trace_id" => assert_eq!(schema["pattern"], TRACE_ID_PATTERN, "{what}"),
                        ("path", _) => assert_eq!(schema["pattern"], HEX_ID_PATTERN, "{what}"),
                        ("query", Some("string")) => {
                            assert_eq!(schema["maxLength"], MAX_TEXT_CHARS, "{what}");
                            assert!(schema["pattern"].is_string(), "{what}");
                        }
                        ("query", Some("integer")) if name == "limit" || name == "lines" => {
                            assert!(schema["minimum"] == 1 && schema["maximum"].is_u64(), "{what}: {schema}")
                        }
                        _ => {}
                    }
                }
                if params.contains_key("from") {
                    let window = &operation["x-tayga-window"];
                    assert!(window["max_ns"].is_u64(), "{method} {path}: no window rule");
                    let described = params["from"]["description"].as_str().unwrap();
                    assert!(described.contains("may span at most"), "{method} {path}: {described}");
                }
                if let Some(cursor) = params.get("cursor") {
                    assert!(
                        cursor["schema"]["pattern"].as_str().unwrap().contains("([0-9a-fA-F]{2})*")
                            || cursor["schema"]["pattern"].as_str().unwrap().contains("(3[0-9])"),
                        "{path}"
                    );
                }
                for status in ["400", "401", "503"] {
                    assert!(operation["responses"].get(status).is_some(), "{method} {path} lacks {status}");
                }
                assert!(operation["responses"]["503"]["headers"]["Retry-After"].is_object(), "{path}");
                if method == "post" {
                    assert!(operation["responses"].get("403").is_some(), "{method} {path} lacks 403");
                }
            }
        }
        assert_eq!(doc["security"], json!([{"bearer": []}]));
        let alert = &doc["components"]["schemas"]["AlertRecord"]["properties"];
        assert_eq!(alert["last_at"]["format"], "uint64", "{alert}");
    }

    #[test]
    fn operation_ids_are_unique_and_links_name_real_operations() {
        let doc = doc(true);
        let mut ids = std::collections::BTreeSet::new();
        for item in doc["paths"].as_object().unwrap().values() {
            for operation in item.as_object().unwrap().values() {
                let id = operation["operationId"].as_str().unwrap();
                assert!(ids.insert(id.to_string()), "operationId {id} twice");
            }
        }
        for (path, method, link, target, parameters) in LINKS {
            assert!(ids.contains(*target), "{target}");
            let given = &doc["paths"][*path][*method]["responses"]["200"]["links"][*link]["parameters"];
            assert_eq!(given.as_object().unwrap().len(), parameters.len());
        }
    }

    #[test]
    fn an_open_api_asks_for_no_token() {
        let doc = doc(false);
        assert!(doc.get("security").is_none());
        assert!(doc["paths"]["/api/v1/logs"]["get"]["responses"].get("401").is_none());
    }

    #[test]
    fn the_kind_patterns_name_every_kind() {
        let doc = doc(true);
        let list = parameters(&doc, "/api/v1/alerts", "get");
        let add = parameters(&doc, "/api/v1/silences", "post");
        for kind in AlertKind::ALL {
            for p in [&list["kind"], &add["kind"]] {
                assert!(
                    p["schema"]["pattern"].as_str().unwrap().contains(&format!("|{}", kind.as_str()))
                        || p["schema"]["pattern"].as_str().unwrap().contains(&format!("({}|", kind.as_str()))
                );
            }
        }
    }
}
