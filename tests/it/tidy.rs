//! Tidy checks, in the spirit of rust-analyzer's: rules of ARCHITECTURE.md enforced from
//! the source text, so a change that breaks one fails here instead of in review.
//!
//! - **Layers**: the table under "Layers" in ARCHITECTURE.md is read from the document
//!   itself; a module may name (`crate::x`) only modules of lower layers.
//! - **A daemon's insides stay inside**: outside `src/daemon/`, a daemon's folder is named
//!   only through its entry point.
//! - **SQL lives in `store/`**: no string literal outside `src/store/` holds a statement, and
//!   no code outside it names the client (`clickhouse::`, the tests' raw queries).
//! - **Every statement is registered**: each statement constant or builder of `store/` is
//!   used where `store::statements::all` is built.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`src/store/mod.rs` → `store`); `None`
/// for the crate root and the binary, which sit above every layer.
fn module_of(path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root().join("src")).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    match first.as_str() {
        "lib.rs" | "bin" => None,
        name => Some(name.trim_end_matches(".rs").to_string()),
    }
}

/// Source text split into code (comments and literals blanked) and string literals.
struct Lexed {
    code: String,
    strings: Vec<(usize, String)>,
}

/// A small Rust lexer: enough to tell code from comments and string literals, raw and
/// byte strings, char literals and lifetimes included.
fn lex(text: &str) -> Lexed {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut strings = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                        code.push('\n');
                    }
                    i += 1;
                }
            }
            continue;
        }
        let starts_word = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        // Raw strings: r"…", r#"…"#, br#"…"#.
        let raw_at = if starts_word && c == 'r' {
            Some(i + 1)
        } else if starts_word && c == 'b' && at(i + 1) == 'r' {
            Some(i + 2)
        } else {
            None
        };
        if let Some(mut j) = raw_at {
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) == '"' {
                let start_line = line;
                let mut literal = String::new();
                j += 1;
                loop {
                    if j >= chars.len() {
                        break;
                    }
                    if chars[j] == '"' && (0..hashes).all(|h| at(j + 1 + h) == '#') {
                        j += 1 + hashes;
                        break;
                    }
                    if chars[j] == '\n' {
                        line += 1;
                        code.push('\n');
                    }
                    literal.push(chars[j]);
                    j += 1;
                }
                strings.push((start_line, literal));
                code.push_str("\"\"");
                i = j;
                continue;
            }
        }
        if c == '"' || (starts_word && c == 'b' && at(i + 1) == '"') {
            let start_line = line;
            let mut literal = String::new();
            let mut j = if c == '"' { i + 1 } else { i + 2 };
            while j < chars.len() && chars[j] != '"' {
                if chars[j] == '\\' {
                    j += 1;
                }
                if at(j) == '\n' {
                    line += 1;
                    code.push('\n');
                }
                literal.push(at(j));
                j += 1;
            }
            strings.push((start_line, literal));
            code.push_str("\"\"");
            i = j + 1;
            continue;
        }
        if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a, 'static).
            if at(i + 1) == '\\' {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                code.push_str("' '");
                i = j + 1;
                continue;
            }
            if at(i + 2) == '\'' {
                code.push_str("' '");
                i += 3;
                continue;
            }
        }
        if c == '\n' {
            line += 1;
        }
        code.push(c);
        i += 1;
    }
    Lexed { code, strings }
}

/// The top-level modules that code names through `crate::` (`crate::store::Store`, and
/// each item of `use crate::{alert::Alert, store}`), with the line of each mention.
fn crate_references(code: &str) -> Vec<(usize, String)> {
    references(code, "crate::")
}

/// The names that code reaches below `prefix` (`crate::daemon::`), groups included.
fn references(code: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let line_of = |offset: usize| code[..offset].matches('\n').count() + 1;
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    for (offset, _) in code.match_indices(prefix) {
        if offset > 0 && code[..offset].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[offset + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Each top-level item of the group names a module (or an item of the root).
            let mut depth = 0;
            let mut item_start = true;
            for (k, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident(&group[k..]);
                        if !name.is_empty() {
                            found.push((line_of(offset), name));
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                found.push((line_of(offset), name));
            }
        }
    }
    found
}

/// The layer table of ARCHITECTURE.md: `| N | `a`, `b` | … |` rows under "## Layers".
fn layers() -> BTreeMap<String, usize> {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let section = doc.split("\n## Layers").nth(1).expect("ARCHITECTURE.md has a `## Layers` section");
    let section = section.split("\n## ").next().unwrap();
    let mut layers = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Some(Ok(layer)) = cells.get(1).map(|c| c.parse::<usize>()) else { continue };
        for module in cells[2].split(',') {
            let module = module.trim().trim_matches('`').trim_end_matches('/');
            assert!(!module.is_empty(), "an empty module in the layer table: {row}");
            assert!(layers.insert(module.to_string(), layer).is_none(), "{module} is in two layers");
        }
    }
    assert!(layers.len() > 3, "the layer table of ARCHITECTURE.md was not found or is too short");
    layers
}

fn sources() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    files.sort();
    files.into_iter().map(|p| (p.clone(), std::fs::read_to_string(&p).unwrap())).collect()
}

fn layer_violations(files: &[(PathBuf, String)], layers: &BTreeMap<String, usize>) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, text) in files {
        let Some(module) = module_of(path) else { continue };
        let rel = path.strip_prefix(root()).unwrap().display().to_string();
        let Some(&own) = layers.get(&module) else {
            problems.push(format!("{rel}: module `{module}` is in no layer of ARCHITECTURE.md"));
            continue;
        };
        for (line, target) in crate_references(&lex(text).code) {
            if target == module {
                continue;
            }
            match layers.get(&target) {
                Some(&layer) if layer < own => {}
                Some(&layer) => problems.push(format!(
                    "{rel}:{line}: `{module}` (layer {own}) imports `{target}` (layer {layer}): a module may import only lower layers"
                )),
                None => {}
            }
        }
    }
    problems
}

/// Phrases that only a ClickHouse statement holds (upper case, as every statement of
/// Tayga is written). `SELECT` alone is also a word of span names (`SELECT orders`), so it
/// counts only with a `FROM` or a call: see [`is_sql`].
const SQL_PHRASES: &[&str] = &[
    "INSERT INTO",
    "ALTER TABLE",
    "CREATE TABLE",
    "CREATE DATABASE",
    "DROP TABLE",
    "DROP DATABASE",
    "DROP PARTITION",
    "OPTIMIZE TABLE",
    "TRUNCATE TABLE",
    "RENAME TABLE",
    "MODIFY SETTING",
    "SHOW TABLES",
    "SYSTEM FLUSH",
    " FINAL",
    "GROUP BY",
    "ORDER BY",
    " WHERE ",
];

fn is_sql(literal: &str) -> Option<&'static str> {
    if literal.contains("SELECT ") && (literal.contains(" FROM ") || literal.contains('(')) {
        return Some("SELECT");
    }
    SQL_PHRASES.iter().find(|p| literal.contains(*p)).map(|p| p.trim())
}

/// What only `store/` may name in code: the client crate, and `Store`'s raw queries for
/// tests (the client itself is private to `store/`).
const CLIENT_MARKERS: &[&str] = &["clickhouse::", "query_for_tests", "select_for_tests"];

fn sql_outside_store(files: &[(PathBuf, String)]) -> Vec<String> {
    let store = root().join("src/store");
    let mut problems = Vec::new();
    for (path, text) in files {
        if path.starts_with(&store) {
            continue;
        }
        let rel = path.strip_prefix(root()).unwrap().display().to_string();
        let lexed = lex(text);
        for (line, literal) in lexed.strings {
            if let Some(phrase) = is_sql(&literal) {
                problems.push(format!("{rel}:{line}: a SQL statement (`{phrase}`) outside src/store/"));
            }
        }
        for (n, code) in lexed.code.lines().enumerate() {
            for marker in CLIENT_MARKERS.iter().filter(|m| code.contains(*m)) {
                problems.push(format!("{rel}:{}: `{marker}` outside src/store/", n + 1));
            }
        }
    }
    problems
}

/// Daemon folders (`src/daemon/<name>/`) that name another daemon's folder.
fn daemons_importing_daemons(files: &[(PathBuf, String)]) -> Vec<String> {
    let daemon_dir = root().join("src/daemon");
    let mut problems = Vec::new();
    for (path, text) in files {
        let Ok(rel) = path.strip_prefix(&daemon_dir) else { continue };
        let mut parts = rel.components();
        let (Some(own), Some(_)) = (parts.next(), parts.next()) else { continue };
        let own = own.as_os_str().to_string_lossy().into_owned();
        for (line, other) in references(&lex(text).code, "crate::daemon::") {
            if other != own && daemon_dir.join(&other).is_dir() {
                let shown = path.strip_prefix(root()).unwrap().display();
                problems.push(format!("{shown}:{line}: the {own} daemon imports the {other} daemon"));
            }
        }
    }
    problems
}

/// What outside `src/daemon/` may name of a daemon's folder: its entry point, which
/// `tayga serve` calls. Anything else two sides share lives below (`workflow`, `store`,
/// `bus`), so a command never depends on a daemon's insides.
const DAEMON_ENTRY_POINTS: &[&str] = &["serve", "run"];

/// Code outside `src/daemon/` that names a daemon's folder other than by its entry point
/// (`crate::daemon::logminer::book::Book`, `daemon::{notifier::store}`).
fn daemon_insides_named_outside(files: &[(PathBuf, String)]) -> Vec<String> {
    let daemon_dir = root().join("src/daemon");
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut problems = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| !p.starts_with(&daemon_dir)) {
        let code = lex(text).code;
        let line_of = |offset: usize| code[..offset].matches('\n').count() + 1;
        for (offset, _) in code.match_indices("daemon::") {
            if offset > 0 && code[..offset].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &code[offset + "daemon::".len()..];
            // The paths this mention names: itself, or each item of its group.
            let items: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => {
                    let mut depth = 0;
                    let end = group
                        .char_indices()
                        .find(|(_, c)| match c {
                            '{' => {
                                depth += 1;
                                false
                            }
                            '}' if depth == 0 => true,
                            '}' => {
                                depth -= 1;
                                false
                            }
                            _ => false,
                        })
                        .map_or(group.len(), |(k, _)| k);
                    group[..end].split(',').map(str::trim).collect()
                }
                None => vec![rest],
            };
            for item in items {
                let folder = ident(item);
                if folder.is_empty() || !daemon_dir.join(&folder).is_dir() {
                    continue;
                }
                let inner = item[folder.len()..].strip_prefix("::").map(ident).unwrap_or_default();
                if !DAEMON_ENTRY_POINTS.contains(&inner.as_str()) {
                    let shown = path.strip_prefix(root()).unwrap().display();
                    problems.push(format!("{shown}:{}: names the {folder} daemon's insides", line_of(offset)));
                }
            }
        }
    }
    problems
}

#[test]
fn only_a_daemons_entry_point_is_named_outside_it() {
    let problems = daemon_insides_named_outside(&sources());
    assert!(
        problems.is_empty(),
        "code outside src/daemon/ reaches into a daemon (ARCHITECTURE.md, invariants):\n{}",
        problems.join("\n")
    );
    let probe = vec![(
        root().join("src/cmd/x.rs"),
        "use crate::daemon::logminer::book::Book;\nuse crate::daemon::{self, Shutdown, notifier::store};\nlet _ = daemon::writer::run(c);\nuse crate::daemon::logminer;".to_string(),
    )];
    assert_eq!(
        daemon_insides_named_outside(&probe),
        vec![
            "src/cmd/x.rs:1: names the logminer daemon's insides".to_string(),
            "src/cmd/x.rs:2: names the notifier daemon's insides".to_string(),
            "src/cmd/x.rs:4: names the logminer daemon's insides".to_string(),
        ]
    );
}

#[test]
fn no_daemon_imports_another() {
    let problems = daemons_importing_daemons(&sources());
    assert!(
        problems.is_empty(),
        "daemons must not import each other (ARCHITECTURE.md, invariants):\n{}",
        problems.join("\n")
    );
    let probe = vec![(root().join("src/daemon/api/x.rs"), "use crate::daemon::notifier::store::Status;\nuse crate::daemon::{Shutdown, api::y, writer::Z};\nuse crate::daemon::api::y;".to_string())];
    assert_eq!(
        daemons_importing_daemons(&probe),
        vec![
            "src/daemon/api/x.rs:1: the api daemon imports the notifier daemon".to_string(),
            "src/daemon/api/x.rs:2: the api daemon imports the writer daemon".to_string(),
        ]
    );
}

#[test]
fn every_import_goes_down_a_layer() {
    let problems = layer_violations(&sources(), &layers());
    assert!(problems.is_empty(), "imports that climb a layer (ARCHITECTURE.md, Layers):\n{}", problems.join("\n"));
}

#[test]
fn sql_lives_only_in_store() {
    let problems = sql_outside_store(&sources());
    assert!(problems.is_empty(), "SQL outside src/store/ (ARCHITECTURE.md, invariants):\n{}", problems.join("\n"));
}

/// A statement constant (`…_SQL`, `…_REST`, `…_DDL`) or builder (`fn …_sql`, `fn …_rest`) of
/// any file under `src/store/` is used where the registry is built (a file's `statements()`,
/// `migrate::all_statements`, or `statements.rs`), so `tests/it/store.rs` runs it.
fn unregistered_statements(files: &[(PathBuf, String)]) -> Vec<String> {
    let store = root().join("src/store");
    let mut registering = String::new();
    let mut declared = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with(&store)) {
        if path.ends_with("statements.rs") {
            registering.push_str(text);
            continue;
        }
        for start in ["pub fn statements(", "pub fn all_statements("] {
            if let Some(at) = text.find(start) {
                let body = &text[at..];
                registering.push_str(&body[..body.find("\n}\n").unwrap_or(body.len())]);
            }
        }
        for line in text.lines().map(str::trim_start) {
            let line = line.strip_prefix("pub ").unwrap_or(line);
            let name = if let Some(rest) = line.strip_prefix("const ") {
                rest.split(':').next().filter(|n| n.ends_with("_SQL") || n.ends_with("_REST") || n.ends_with("_DDL"))
            } else if let Some(rest) = line.strip_prefix("fn ") {
                rest.split('(').next().filter(|n| n.ends_with("_sql") || n.ends_with("_rest"))
            } else {
                None
            };
            if let Some(name) = name {
                let rel = path.strip_prefix(root()).unwrap().display();
                declared.push((format!("{rel}: `{name}` is not registered"), name.to_string()));
            }
        }
    }
    declared.into_iter().filter(|(_, name)| !registering.contains(name.as_str())).map(|(problem, _)| problem).collect()
}

#[test]
fn every_statement_of_store_is_registered() {
    let problems = unregistered_statements(&sources());
    assert!(problems.is_empty(), "statements missing from store::statements::all:\n{}", problems.join("\n"));
}

#[test]
fn the_checks_see_what_they_look_for() {
    // The checks themselves, on text made to break them: a check that sees nothing passes
    // for the wrong reason.
    let layers: BTreeMap<String, usize> =
        [("identity", 1), ("store", 4), ("daemon", 7)].into_iter().map(|(m, l)| (m.to_string(), l)).collect();
    let file = |rel: &str, text: &str| (root().join(rel), text.to_string());
    let files = vec![
        file("src/identity.rs", "use crate::{store::LogRow, identity};\nfn f() { crate::daemon::run(); }\n"),
        file("src/daemon/x.rs", "// crate::nothing in a comment\nuse crate::store::{Store, read};\nconst Q: &str = \"SELECT count() FROM t\";\nconst OP: &str = \"SELECT orders\";\n"),
        file("src/store/q.rs", "const Q: &str = r#\"SELECT x FROM t FINAL\"#;"),
        file("src/store/ok.rs", "fn f<'a>(c: char) -> bool { c == '\"' || c == '\\'' }\nconst S: &str = \"a \\\" b\";"),
        file("src/daemon/y.rs", "// clickhouse:: in a comment\nfn f(s: &Store) { s.query_for_tests(Q); }\n"),
        file("src/store/z.rs", "fn f(s: &Store) { s.client().query(Q); let _: clickhouse::Client; }"),
    ];
    let layer_problems = layer_violations(&files, &layers);
    assert_eq!(layer_problems.len(), 2, "{layer_problems:#?}");
    assert!(
        layer_problems[0].contains("src/identity.rs:1: `identity` (layer 1) imports `store`"),
        "{layer_problems:#?}"
    );
    assert!(
        layer_problems[1].contains("src/identity.rs:2: `identity` (layer 1) imports `daemon`"),
        "{layer_problems:#?}"
    );
    let sql_problems = sql_outside_store(&files);
    assert_eq!(
        sql_problems,
        vec![
            "src/daemon/x.rs:3: a SQL statement (`SELECT`) outside src/store/".to_string(),
            "src/daemon/y.rs:2: `query_for_tests` outside src/store/".to_string(),
        ]
    );
    let registry = vec![
        file("src/store/a.rs", "const A_SQL: &str = \"\";\npub fn b_rest() {}\npub fn statements() { A_SQL }\n}\n"),
        file("src/store/q/c.rs", "pub const C_SQL: &str = \"\";\n"),
    ];
    assert_eq!(
        unregistered_statements(&registry),
        ["src/store/a.rs: `b_rest` is not registered", "src/store/q/c.rs: `C_SQL` is not registered"]
    );
    let lexed = lex("let s = r##\"a \"# b\"##; // crate::x\nlet c = 'x'; let l: &'static str = \"y\";");
    assert_eq!(lexed.strings, vec![(1, "a \"# b".to_string()), (2, "y".to_string())]);
    assert!(!lexed.code.contains("crate::x"));
}
