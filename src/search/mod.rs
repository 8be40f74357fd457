//! The search language of logs and traces, pure (no I/O): one parser for the API, the shell
//! commands and the web app, so a query means the same wherever it is typed.
//!
//! A query is terms separated by spaces, all of which must hold:
//!
//! | term | matches |
//! | --- | --- |
//! | `word`, `"a phrase"` | a log whose body contains it, ignoring case |
//! | `key=value`, `key="a value"` | an attribute or resource attribute equal to the value |
//! | `service:NAME` | the service (several: any of them) |
//! | `severity>=LEVEL` (also `>`, `<=`, `<`, `:`, `=`) | the severity; LEVEL is `trace`, `debug`, `info`, `warn`, `error`, `fatal` or a number 1 to 24; `severity:error` is the whole ERROR band (17 to 20) |
//! | `template:ID` | the template the log matched (1 to 16 hex digits; several: any) |
//! | `trace:ID` | the trace (32 hex digits; several: any) |
//! | `operation:NAME` | traces: a span of this name (several: any) |
//! | `duration>=250ms` (also `>`, `<=`, `<`) | traces: the duration, with a unit `ns`, `us`, `ms`, `s`, `m` or `h` |
//! | `status:error` (`ok`, `unset`) | traces: the status (several: any) |
//!
//! The fields may be written with `=` too (`service=x`); any other `key=` is an attribute.
//! A word that looks like a term (`a=b`, `service:x`) is searched as text when quoted.
//! Inside quotes, `\"` is a quote and `\\` a backslash. Names of fields are lowercase
//! ASCII; a name before `:` that is not a field (`http://host`) leaves the word a word.
//! Errors name what is wrong and where (a character offset), so an editor can point at it.

use std::fmt;

/// The most terms one query may hold (every term is a condition of the statement).
pub const MAX_TERMS: usize = 32;

/// OTLP severity bands: each level is four numbers (TRACE 1-4 … FATAL 21-24).
pub const LEVELS: [(&str, u8); 6] =
    [("trace", 1), ("debug", 5), ("info", 9), ("warn", 13), ("error", 17), ("fatal", 21)];

/// A parsed query: what each kind of term asks, in the order typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Words and phrases, each matched in a log's body ignoring case; all must match.
    pub text: Vec<String>,
    /// `key=value`: an attribute or resource attribute with this exact value; all must hold.
    pub attributes: Vec<(String, String)>,
    /// Any of these services.
    pub services: Vec<String>,
    /// Severity numbers, both ends included.
    pub severity: Option<Range<u8>>,
    /// Any of these templates.
    pub templates: Vec<u64>,
    /// Any of these traces (lowercase hex).
    pub traces: Vec<String>,
    /// Traces with a span of any of these names.
    pub operations: Vec<String>,
    /// A duration range in nanoseconds, both ends included.
    pub duration: Option<Range<u64>>,
    /// Any of these OTLP status codes (0 unset, 1 ok, 2 error).
    pub statuses: Vec<u8>,
}

/// An inclusive range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range<T> {
    pub min: T,
    pub max: T,
}

/// What a query searches: each accepts only the terms that mean something for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Logs,
    Traces,
}

/// A query that cannot be read: what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at character {}: {message}", position + 1)]
pub struct ParseError {
    /// Offset of the offending term, in characters from the start (0-based).
    pub position: usize,
    /// Its length in characters (at least 1), so an editor can underline it.
    pub length: usize,
    pub message: String,
}

impl Query {
    /// Nothing asked: every row of the window matches.
    pub fn is_empty(&self) -> bool {
        *self == Query::default()
    }
}

/// Reads `input` as a query for `scope`: a term of the other scope (`duration>` for logs,
/// a free word for traces) is an error naming it.
pub fn parse(input: &str, scope: Scope) -> Result<Query, ParseError> {
    let mut query = Query::default();
    let mut count = 0;
    let mut lexer = Lexer { chars: input.chars().collect(), at: 0 };
    while let Some((term, span)) = lexer.next_term()? {
        count += 1;
        if count > MAX_TERMS {
            return Err(span.error(format!("a query may hold at most {MAX_TERMS} terms")));
        }
        apply(&mut query, term, span, scope)?;
    }
    Ok(query)
}

/// A term with its place in the input.
#[derive(Debug, Clone, Copy)]
struct Span {
    position: usize,
    length: usize,
}

impl Span {
    fn error(self, message: impl Into<String>) -> ParseError {
        ParseError { position: self.position, length: self.length.max(1), message: message.into() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Colon,
    Eq,
    Ge,
    Gt,
    Le,
    Lt,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Colon => ":",
            Op::Eq => "=",
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Lt => "<",
        }
    }
}

#[derive(Debug)]
enum Term {
    Text(String),
    Field { name: String, op: Op, value: String },
}

/// The fields written `name:value`; any other `name:` leaves a word a word.
const COLON_FIELDS: [&str; 6] = ["service", "severity", "template", "trace", "operation", "status"];

struct Lexer {
    chars: Vec<char>,
    at: usize,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn next_term(&mut self) -> Result<Option<(Term, Span)>, ParseError> {
        while self.peek(0).is_some_and(char::is_whitespace) {
            self.at += 1;
        }
        let start = self.at;
        let Some(first) = self.peek(0) else { return Ok(None) };
        if first == '"' {
            let text = self.quoted()?;
            let span = Span { position: start, length: self.at - start };
            self.expect_end_of_term(span)?;
            return Ok(Some((Term::Text(text), span)));
        }
        // A field name, then an operator: a term; anything else: a word.
        let mut end = self.at;
        while self.chars.get(end).is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')) {
            end += 1;
        }
        let name: String = self.chars[self.at..end].iter().collect();
        let compared = matches!(name.as_str(), "severity" | "duration");
        let op = match (self.chars.get(end), self.chars.get(end + 1)) {
            (Some('>'), Some('=')) if compared => Some((Op::Ge, 2)),
            (Some('<'), Some('=')) if compared => Some((Op::Le, 2)),
            (Some('>'), _) if compared => Some((Op::Gt, 1)),
            (Some('<'), _) if compared => Some((Op::Lt, 1)),
            (Some('='), _) if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => Some((Op::Eq, 1)),
            (Some(':'), _) if COLON_FIELDS.contains(&name.as_str()) => Some((Op::Colon, 1)),
            _ => None,
        };
        match op {
            Some((op, width)) if !name.is_empty() => {
                self.at = end + width;
                let value = if self.peek(0) == Some('"') { self.quoted()? } else { self.bare() };
                let span = Span { position: start, length: self.at - start };
                self.expect_end_of_term(span)?;
                Ok(Some((Term::Field { name, op, value }, span)))
            }
            _ => {
                let word = self.bare();
                let span = Span { position: start, length: self.at - start };
                if word.contains('"') {
                    let quote = start + word.find('"').map_or(0, |b| word[..b].chars().count());
                    return Err(Span { position: quote, length: 1 }
                        .error("a quote inside a word; put the whole phrase in quotes, or write \\\" inside quotes"));
                }
                Ok(Some((Term::Text(word), span)))
            }
        }
    }

    /// Up to the next space.
    fn bare(&mut self) -> String {
        let start = self.at;
        while self.peek(0).is_some_and(|c| !c.is_whitespace()) {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    /// A `"…"` string at the cursor, with `\"` and `\\` read as one character.
    fn quoted(&mut self) -> Result<String, ParseError> {
        let open = self.at;
        self.at += 1;
        let mut out = String::new();
        loop {
            match self.peek(0) {
                None => {
                    return Err(Span { position: open, length: 1 }.error("this quote is never closed"));
                }
                Some('"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some('\\') => match self.peek(1) {
                    Some(c @ ('"' | '\\')) => {
                        out.push(c);
                        self.at += 2;
                    }
                    _ => {
                        return Err(Span { position: self.at, length: 2 }
                            .error("inside quotes, a backslash comes before \" or \\ only"));
                    }
                },
                Some(c) => {
                    out.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// A closing quote must end its term (`"a"b` is two terms run together).
    fn expect_end_of_term(&self, span: Span) -> Result<(), ParseError> {
        match self.peek(0) {
            Some(c) if !c.is_whitespace() => Err(Span { position: self.at, length: 1 }.error(format!(
                "a space must follow the closing quote of {}",
                self.chars[span.position..self.at].iter().collect::<String>()
            ))),
            _ => Ok(()),
        }
    }
}

fn apply(query: &mut Query, term: Term, span: Span, scope: Scope) -> Result<(), ParseError> {
    let (name, op, value) = match term {
        Term::Text(text) => {
            if scope == Scope::Traces {
                return Err(span.error(format!(
                    "free text searches log bodies; for traces use operation:NAME or key=value (found {text:?})"
                )));
            }
            if text.is_empty() {
                return Err(span.error("an empty phrase matches everything; remove it"));
            }
            query.text.push(text);
            return Ok(());
        }
        Term::Field { name, op, value } => (name, op, value),
    };
    let only_for = |wanted: Scope, what: &str| -> Result<(), ParseError> {
        if scope == wanted {
            Ok(())
        } else {
            let which = if wanted == Scope::Logs { "logs" } else { "traces" };
            Err(span.error(format!("{what} applies to {which} only")))
        }
    };
    let comparison = matches!(op, Op::Ge | Op::Gt | Op::Le | Op::Lt);
    if value.is_empty() && !(op == Op::Eq && span.length > name.len() + 1) {
        return Err(span.error(format!("{name}{} needs a value", op.text())));
    }
    match name.as_str() {
        "severity" => {
            only_for(Scope::Logs, "severity")?;
            let (min, max) = severity_bounds(&value).ok_or_else(|| {
                span.error(format!(
                    "unknown severity {value:?}: use trace, debug, info, warn, error, fatal or a number 1 to 24"
                ))
            })?;
            let range = match op {
                Op::Colon | Op::Eq => Range { min, max },
                Op::Ge => Range { min, max: 24 },
                Op::Gt => Range { min: max + 1, max: 24 },
                Op::Le => Range { min: 1, max },
                Op::Lt => Range { min: 1, max: min.saturating_sub(1) },
            };
            query.severity = Some(narrow(query.severity, range, span, "severity")?);
        }
        "duration" => {
            only_for(Scope::Traces, "duration")?;
            if !comparison {
                return Err(span.error("duration compares with >=, >, <= or <, as in duration>=250ms"));
            }
            let ns = duration_ns(&value).ok_or_else(|| {
                span.error(format!("{value:?} is not a duration: a number and a unit ns, us, ms, s, m or h"))
            })?;
            let range = match op {
                Op::Ge => Range { min: ns, max: u64::MAX },
                Op::Gt => Range { min: ns.saturating_add(1), max: u64::MAX },
                Op::Le => Range { min: 0, max: ns },
                _ => Range { min: 0, max: ns.saturating_sub(1) },
            };
            query.duration = Some(narrow(query.duration, range, span, "duration")?);
        }
        "service" => query.services.push(value),
        "template" => {
            only_for(Scope::Logs, "template")?;
            let id = (value.len() <= 16 && value.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u64::from_str_radix(&value, 16).ok())
                .flatten()
                .ok_or_else(|| span.error(format!("template:{value}: a template id is 1 to 16 hex digits")))?;
            query.templates.push(id);
        }
        "trace" => {
            if value.len() != 32 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(span.error(format!("trace:{value}: a trace id is 32 hex digits")));
            }
            query.traces.push(value.to_ascii_lowercase());
        }
        "operation" => {
            only_for(Scope::Traces, "operation")?;
            query.operations.push(value);
        }
        "status" => {
            only_for(Scope::Traces, "status")?;
            let code = match value.to_ascii_lowercase().as_str() {
                "unset" => 0,
                "ok" => 1,
                "error" => 2,
                _ => return Err(span.error(format!("status:{value}: the status is unset, ok or error"))),
            };
            query.statuses.push(code);
        }
        // Only the fields above are lexed with a colon.
        _ => query.attributes.push((name, value)),
    }
    Ok(())
}

/// The intersection of two conditions on one field; empty is an error (nothing could match).
fn narrow<T: Ord + Copy>(old: Option<Range<T>>, new: Range<T>, span: Span, what: &str) -> Result<Range<T>, ParseError> {
    let range = match old {
        None => new,
        Some(old) => Range { min: old.min.max(new.min), max: old.max.min(new.max) },
    };
    if range.min > range.max {
        return Err(span.error(format!("this {what} condition excludes everything the others allow")));
    }
    Ok(range)
}

/// A severity level's band (`error`: 17 to 20), or one number (`17`: 17 to 17).
fn severity_bounds(value: &str) -> Option<(u8, u8)> {
    let lower = value.to_ascii_lowercase();
    let lower = if lower == "warning" { "warn".to_string() } else { lower };
    if let Some((_, first)) = LEVELS.iter().find(|(name, _)| *name == lower) {
        return Some((*first, first + 3));
    }
    match value.parse::<u8>() {
        Ok(n @ 1..=24) => Some((n, n)),
        _ => None,
    }
}

/// `250ms`, `1.5s`, `2m`: nanoseconds.
pub fn duration_ns(value: &str) -> Option<u64> {
    let split = value.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = value.split_at(split);
    let scale: u64 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    };
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') || number.matches('.').count() > 1 {
        return None;
    }
    if !number.contains('.') {
        return number.parse::<u64>().ok()?.checked_mul(scale);
    }
    let ns = number.parse::<f64>().ok()? * scale as f64;
    (ns.is_finite() && ns <= u64::MAX as f64).then_some(ns.round() as u64)
}

/// A value written so the parser reads it back unchanged: bare when it can be, else quoted.
fn quote_if_needed(value: &str, as_text: bool) -> String {
    let needs_quotes = value.is_empty()
        || value.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\')
        || (as_text && looks_like_a_term(value));
    let plain = !needs_quotes;
    if plain {
        value.to_string()
    } else {
        format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// Whether a bare word would be read as a term rather than as text.
fn looks_like_a_term(word: &str) -> bool {
    let mut lexer = Lexer { chars: word.chars().collect(), at: 0 };
    !matches!(lexer.next_term(), Ok(Some((Term::Text(_), _))))
}

/// The query in its canonical form, which [`parse`] reads back to an equal `Query` (the
/// shell and the app show it; a link carries it).
impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut terms: Vec<String> = Vec::new();
        terms.extend(self.services.iter().map(|s| format!("service:{}", quote_if_needed(s, false))));
        if let Some(Range { min, max }) = self.severity {
            if min == max {
                terms.push(format!("severity:{min}"));
            } else {
                if min > 1 {
                    terms.push(format!("severity>={min}"));
                }
                if max < 24 {
                    terms.push(format!("severity<={max}"));
                }
                if min <= 1 && max >= 24 {
                    terms.push("severity>=1".into());
                }
            }
        }
        terms.extend(self.templates.iter().map(|t| format!("template:{t:016x}")));
        terms.extend(self.traces.iter().map(|t| format!("trace:{t}")));
        terms.extend(self.operations.iter().map(|o| format!("operation:{}", quote_if_needed(o, false))));
        if let Some(Range { min, max }) = self.duration {
            if min > 0 || max == u64::MAX {
                terms.push(format!("duration>={min}ns"));
            }
            if max < u64::MAX {
                terms.push(format!("duration<={max}ns"));
            }
        }
        terms.extend(self.statuses.iter().map(|s| format!("status:{}", ["unset", "ok", "error"][*s as usize % 3])));
        terms.extend(self.attributes.iter().map(|(k, v)| format!("{k}={}", quote_if_needed(v, false))));
        terms.extend(self.text.iter().map(|t| quote_if_needed(t, true)));
        f.write_str(&terms.join(" "))
    }
}

#[cfg(test)]
mod tests;
