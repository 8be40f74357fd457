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
//!   used where `store::statements::all` is built, and every SQL literal under `store/` is
//!   part of a statement the registry holds.
//! - **`cmd/` writes only to the writers it is given**, never to stdout or stderr itself.
//! - **The web app reads through the handlers**: nothing under `daemon/api/web/` names `store`.
//! - **One consume loop**: only `bus::consume` joins a consumer group.
//! - **The code map names every file**: each `.rs` file under `src/` is in ARCHITECTURE.md's
//!   code map, by path or in its folder's row.
//! - **The repository explains itself**: no pointer at a seed or issue number, `DESIGN.md` or
//!   `../shared` in `src/`, `docs/`, README.md or ARCHITECTURE.md.

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
                    // An escape stands for what it means: `\n` a line break; a backslash at
                    // the end of a line joins it to the next without its indentation.
                    match at(j) {
                        'n' => literal.push('\n'),
                        't' => literal.push('\t'),
                        '\n' => {
                            while at(j + 1).is_whitespace() {
                                if at(j + 1) == '\n' {
                                    line += 1;
                                    code.push('\n');
                                }
                                j += 1;
                            }
                            line += 1;
                            code.push('\n');
                        }
                        c => literal.push(c),
                    }
                    j += 1;
                    continue;
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

/// What `src/model/` may take from the clickhouse crate: the traits a row struct derives
/// to be encoded, never the client.
const ROW_TRAITS: &str = "use clickhouse::{Row, RowOwned, RowRead, RowWrite};";

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
        let model = path.starts_with(root().join("src/model"));
        for (n, code) in lexed.code.lines().enumerate() {
            if model && code.trim() == ROW_TRAITS {
                continue;
            }
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
    // The row structs may derive the crate's row traits; the client stays in the store.
    let probe = vec![(root().join("src/model/x.rs"), format!("{ROW_TRAITS}\nuse clickhouse::Client;"))];
    assert_eq!(sql_outside_store(&probe), ["src/model/x.rs:2: `clickhouse::` outside src/store/"]);
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

/// Text files under `dir` (UTF-8 only: screenshots and other binaries are skipped).
fn text_files(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    if dir.is_file() {
        if let Ok(text) = std::fs::read_to_string(dir) {
            out.push((dir.to_path_buf(), text));
        }
        return;
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        text_files(&entry.unwrap().path(), out);
    }
}

/// What the repository explains itself with: the code (and so every page, CLI line and
/// OpenAPI description rendered from it), the docs, README.md and ARCHITECTURE.md.
fn explained_files() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for part in ["src", "docs", "README.md", "ARCHITECTURE.md"] {
        text_files(&root().join(part), &mut files);
    }
    files.sort();
    files
}

/// Pointers at documents the repository does not hold: the product brief, the user's
/// source documents by number, issue numbers, and anything beside the clone. A rule the
/// code keeps is stated in docs/design.md instead.
fn pointers_outside(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, text) in files {
        let rel = path.strip_prefix(root()).unwrap_or(path).display().to_string();
        // A phrase cut by a line break inside a comment (`seed\n//! 000`) is still one phrase.
        let mut joined = String::with_capacity(text.len());
        let mut lines_of = Vec::with_capacity(text.len());
        for (n, line) in text.lines().enumerate() {
            let body = line.trim_start();
            let body = ["//!", "///", "//", "#", "*"].iter().find_map(|m| body.strip_prefix(m)).unwrap_or(body);
            for c in body.trim_start().chars().chain([' ']) {
                joined.push(c);
                lines_of.extend(std::iter::repeat_n(n + 1, c.len_utf8()));
            }
        }
        let lower = joined.to_lowercase();
        let mut found = Vec::new();
        for (at, phrase) in lower.match_indices("seed 0").chain(lower.match_indices("seeds 0")) {
            found.push((at, phrase.to_string()));
        }
        for (at, _) in lower.match_indices("issue") {
            let rest = lower[at + "issue".len()..].trim_start_matches([' ', '#', 's']);
            if rest.starts_with(|c: char| c.is_ascii_digit()) && !lower[..at].ends_with(|c: char| c.is_alphanumeric()) {
                found.push((at, joined[at..].chars().take(8).collect()));
            }
        }
        for phrase in ["DESIGN.md", "../shared"] {
            found.extend(joined.match_indices(phrase).map(|(at, p)| (at, p.to_string())));
        }
        found.sort();
        for (at, phrase) in found {
            let line = lines_of.get(at).copied().unwrap_or(0);
            problems.push(format!("{rel}:{line}: `{phrase}` points outside the repository"));
        }
    }
    problems
}

#[test]
fn the_repository_explains_itself() {
    let problems = pointers_outside(&explained_files());
    assert!(
        problems.is_empty(),
        "pointers at documents outside the repository (state the rule, or point at its docs/design.md section):\n{}",
        problems.join("\n")
    );
}

/// Every string literal under `src/store/` that holds SQL is (a part of) a statement of the
/// registry, so `tests/it/store.rs` runs it on 18.16 and current ClickHouse: an inline
/// statement that the naming convention of [`unregistered_statements`] misses is seen too.
/// A literal is cut at its `format!` placeholders and compared without whitespace.
fn sql_literals_not_registered(files: &[(PathBuf, String)], registered: &[String]) -> Vec<String> {
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    // The registry writes an insert's rows as JSONEachRow where the client streams RowBinary.
    let registered: Vec<String> = registered
        .iter()
        .map(|s| squeeze(s))
        .flat_map(|s| [s.replace("FORMATJSONEachRow", "FORMATRowBinary"), s])
        .collect();
    let store = root().join("src/store");
    let mut problems = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with(&store)) {
        let rel = path.strip_prefix(root()).unwrap().display();
        // A file's unit tests hold expected statements, not ones it sends.
        let text = text.split("\n#[cfg(test)]\nmod tests").next().unwrap();
        for (line, literal) in lex(text).strings {
            // `…` marks a message about a statement's shape (`expect("CREATE TABLE … ENGINE = …")`).
            if is_sql(&literal).is_none() || literal.contains('…') {
                continue;
            }
            let literal = literal.replace("{{", "{").replace("}}", "}");
            let mut fragments = Vec::new();
            let mut rest = literal.as_str();
            while let Some(open) = rest.find('{') {
                fragments.push(&rest[..open]);
                rest = rest[open..].find('}').map_or("", |close| &rest[open + close + 1..]);
            }
            fragments.push(rest);
            for fragment in fragments.into_iter().map(squeeze).filter(|f| f.len() >= 4) {
                if !registered.iter().any(|r| r.contains(&fragment)) {
                    problems.push(format!("{rel}:{line}: `{fragment}` is in no registered statement"));
                }
            }
        }
    }
    problems
}

#[test]
fn every_sql_string_of_store_is_registered() {
    let cluster = tayga::store::schema::Cluster { name: "tidy".into(), database: "tidy".into() };
    let registered: Vec<String> = tayga::store::statements::all("tidy")
        .into_iter()
        .chain(tayga::store::statements::all_on("tidy", Some(&cluster)))
        .map(|s| s.sql)
        .collect();
    let problems = sql_literals_not_registered(&sources(), &registered);
    assert!(
        problems.is_empty(),
        "SQL under src/store/ that store::statements::all never runs:\n{}",
        problems.join("\n")
    );
}

/// Code under `src/cmd/` that writes to the process's streams itself instead of the
/// writers `cmd::run` is given (only `src/bin/tayga.rs` holds stdout and stderr).
const STREAM_MARKERS: &[&str] = &["println!", "print!", "eprintln!", "eprint!", "dbg!", "stdout()", "stderr()"];

fn streams_in_cmd(files: &[(PathBuf, String)]) -> Vec<String> {
    let cmd = root().join("src/cmd");
    let mut problems = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with(&cmd)) {
        let rel = path.strip_prefix(root()).unwrap().display();
        for (n, code) in lex(text).code.lines().enumerate() {
            for marker in STREAM_MARKERS {
                let hit = code.match_indices(marker).any(|(at, _)| {
                    // `print!` inside `eprint!`/`println!` is that marker's; `.stdout(` with
                    // an argument is a child's stream, not ours.
                    !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                if hit {
                    problems
                        .push(format!("{rel}:{}: `{marker}` in a command (write to the writer it is given)", n + 1));
                }
            }
        }
    }
    problems
}

#[test]
fn commands_print_only_to_the_writers_they_are_given() {
    let problems = streams_in_cmd(&sources());
    assert!(problems.is_empty(), "src/cmd/ touching stdout or stderr itself:\n{}", problems.join("\n"));
}

/// Files of the web app (`src/daemon/api/web/`) that name the store: the app renders from
/// the handler functions the JSON API answers with, so both show the same data.
fn web_reaching_the_store(files: &[(PathBuf, String)]) -> Vec<String> {
    let web = root().join("src/daemon/api/web");
    let mut problems = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with(&web)) {
        let rel = path.strip_prefix(root()).unwrap().display();
        for (line, target) in crate_references(&lex(text).code) {
            if target == "store" {
                problems.push(format!("{rel}:{line}: the web app imports `store` (read through the handlers)"));
            }
        }
    }
    problems
}

#[test]
fn the_web_app_reads_only_through_the_handlers() {
    let problems = web_reaching_the_store(&sources());
    assert!(problems.is_empty(), "src/daemon/api/web/ reaching the store:\n{}", problems.join("\n"));
}

/// Code outside `src/bus/consume/` that joins a consumer group (a Kafka `subscribe` takes
/// the topics): every consuming daemon is a `Handler` of the one consume loop, whose member
/// is the only one that subscribes.
fn groups_joined_outside_the_loop(files: &[(PathBuf, String)]) -> Vec<String> {
    let consume = root().join("src/bus/consume");
    let mut problems = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| !p.starts_with(&consume)) {
        let rel = path.strip_prefix(root()).unwrap().display();
        for (n, code) in lex(text).code.lines().enumerate() {
            if code.contains(".subscribe(&") {
                problems.push(format!(
                    "{rel}:{}: joins a consumer group outside bus::consume (implement a Handler)",
                    n + 1
                ));
            }
        }
    }
    problems
}

#[test]
fn only_the_consume_loop_joins_a_group() {
    let problems = groups_joined_outside_the_loop(&sources());
    assert!(problems.is_empty(), "consumer groups joined outside the consume loop:\n{}", problems.join("\n"));
    let probe = vec![
        (
            root().join("src/daemon/writer/consumer.rs"),
            "consumer.subscribe(&[&topic])?;\nlet rx = tx.subscribe();".to_string(),
        ),
        (root().join("src/bus/consume/member.rs"), "consumer.subscribe(&[&topic])?;".to_string()),
    ];
    assert_eq!(
        groups_joined_outside_the_loop(&probe),
        ["src/daemon/writer/consumer.rs:1: joins a consumer group outside bus::consume (implement a Handler)"]
    );
}

#[test]
fn the_new_checks_see_what_they_look_for() {
    let file = |rel: &str, text: &str| (root().join(rel), text.to_string());
    let docs = vec![
        file("docs/x.md", "As seed 000 says.\nSee ../shared/DESIGN.md §2.\nissue 17, tissue 5 and issues 3"),
        file("src/x.rs", "//! rules (seed\n//! 003): a hash seed zero and docs/design.md are fine\n"),
    ];
    assert_eq!(
        pointers_outside(&docs),
        [
            "docs/x.md:1: `seed 0` points outside the repository",
            "docs/x.md:2: `../shared` points outside the repository",
            "docs/x.md:2: `DESIGN.md` points outside the repository",
            "docs/x.md:3: `issue 17` points outside the repository",
            "docs/x.md:3: `issues 3` points outside the repository",
            "src/x.rs:1: `seed 0` points outside the repository",
        ]
    );
    let store = vec![file(
        "src/store/q.rs",
        "const A_SQL: &str = \"SELECT a FROM t\";\nfn f(t: &str) -> String { format!(\"OPTIMIZE TABLE {t} FINAL\") }\n",
    )];
    assert_eq!(
        sql_literals_not_registered(&store, &["SELECT a\nFROM t".to_string()]),
        [
            "src/store/q.rs:2: `OPTIMIZETABLE` is in no registered statement",
            "src/store/q.rs:2: `FINAL` is in no registered statement"
        ]
    );
    let cmd = vec![file(
        "src/cmd/x.rs",
        "fn f(out: &mut dyn Write) {\n    println!(\"a\");\n    let s = std::io::stdout();\n    writeln!(out, \"println!\");\n    c.stdout(Stdio::null());\n}\n",
    )];
    assert_eq!(
        streams_in_cmd(&cmd),
        [
            "src/cmd/x.rs:2: `println!` in a command (write to the writer it is given)",
            "src/cmd/x.rs:3: `stdout()` in a command (write to the writer it is given)",
        ]
    );
    let web =
        vec![file("src/daemon/api/web/x.rs", "use crate::store::query::MAX_LIMIT;\nuse crate::daemon::api::params;\n")];
    assert_eq!(
        web_reaching_the_store(&web),
        ["src/daemon/api/web/x.rs:1: the web app imports `store` (read through the handlers)"]
    );
}

/// The code map of ARCHITECTURE.md: each row's paths (first cell) and its whole text.
fn code_map() -> Vec<(Vec<String>, String)> {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let section = doc.split("\n## Code map").nth(1).expect("ARCHITECTURE.md has a `## Code map` section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            let first = row.split('|').nth(1).unwrap_or("");
            let paths = first.split(',').map(|p| p.trim().trim_matches('`').to_string()).collect();
            (paths, row.to_string())
        })
        .collect()
}

/// Whether `pattern` (a path of the code map, `<service>` standing for one folder) names
/// `path` itself (`exact`) or a folder above it.
fn map_path_covers(pattern: &str, path: &str, exact: bool) -> bool {
    let pattern: Vec<&str> = pattern.trim_end_matches('/').split('/').collect();
    let path: Vec<&str> = path.split('/').collect();
    let len_ok = if exact { pattern.len() == path.len() } else { pattern.len() < path.len() };
    len_ok && pattern.iter().zip(&path).all(|(a, b)| a == b || (a.starts_with('<') && a.ends_with('>')))
}

/// `.rs` files under `src/` the code map does not name: by their path, or in the row of a
/// folder above them by their path below it, their file name or their name in backticks (a
/// `mod.rs` by its folder, which is the row's own folder or named in it).
fn unmapped_files(files: &[String], map: &[(Vec<String>, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|file| {
            !map.iter().any(|(paths, text)| {
                paths.iter().any(|p| {
                    if map_path_covers(p, file, true) {
                        return true;
                    }
                    if !map_path_covers(p, file, false) {
                        return false;
                    }
                    let below = &file[p.trim_end_matches('/').len() + 1..];
                    let name = below.rsplit('/').next().unwrap();
                    let stem = name.trim_end_matches(".rs");
                    let folder = below.rsplit_once('/').map(|(f, _)| format!("`{f}/`"));
                    text.contains(below)
                        || text.contains(&format!("`{name}`"))
                        || text.contains(&format!("`{stem}`"))
                        || (name == "mod.rs" && folder.is_none_or(|f| text.contains(&f)))
                })
            })
        })
        .cloned()
        .collect()
}

#[test]
fn the_code_map_names_every_file() {
    let files: Vec<String> =
        sources().into_iter().map(|(p, _)| p.strip_prefix(root()).unwrap().display().to_string()).collect();
    let missing = unmapped_files(&files, &code_map());
    assert!(missing.is_empty(), "files the code map of ARCHITECTURE.md does not name:\n{}", missing.join("\n"));
    let map = vec![
        (vec!["src/cli.rs".to_string()], "| `src/cli.rs` | the clap definition |".to_string()),
        (
            vec!["src/store/".to_string()],
            "| `src/store/` | `schema.rs` (DDL), `query/` the reads: `seed` |".to_string(),
        ),
        (vec!["src/daemon/<service>/metrics.rs".to_string()], "| … |".to_string()),
    ];
    let probe: Vec<String> = [
        "src/cli.rs",
        "src/store/schema.rs",
        "src/store/query/seed.rs",
        "src/store/query/mod.rs",
        "src/store/mod.rs",
        "src/store/rows.rs",
        "src/daemon/writer/metrics.rs",
        "src/daemon/repeats.rs",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(unmapped_files(&probe, &map), ["src/store/rows.rs", "src/daemon/repeats.rs"]);
}

/// Pointers `docs/design.md#<anchor>` whose anchor the document does not have (a section
/// renamed or removed under its readers).
fn dangling_design_pointers(files: &[(PathBuf, String)], design: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, text) in files {
        let rel = path.strip_prefix(root()).unwrap_or(path).display().to_string();
        for (n, line) in text.lines().enumerate() {
            for (at, _) in line.match_indices("design.md#") {
                let anchor: String = line[at + "design.md#".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !design.contains(&format!("<a id=\"{anchor}\"></a>")) {
                    problems.push(format!("{rel}:{}: docs/design.md has no section `#{anchor}`", n + 1));
                }
            }
        }
    }
    problems
}

#[test]
fn every_pointer_into_the_design_names_a_section() {
    let design = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let mut files = explained_files();
    text_files(&root().join("tests"), &mut files);
    // This file's probes name missing sections on purpose.
    files.retain(|(p, _)| !p.ends_with("tests/it/tidy.rs"));
    let problems = dangling_design_pointers(&files, &design);
    assert!(problems.is_empty(), "pointers at missing sections of docs/design.md:\n{}", problems.join("\n"));
    let probe = vec![(root().join("src/x.rs"), "// docs/design.md#topics and docs/design.md#gone.".to_string())];
    assert_eq!(
        dangling_design_pointers(&probe, "<a id=\"topics\"></a>"),
        ["src/x.rs:1: docs/design.md has no section `#gone`"]
    );
}
