//! Masking: replace the variable parts of a log line with placeholders before Drain sees it.
//!
//! Drain can only learn that a position varies after it has seen two values there, and it
//! can only wildcard whole tokens. Masking covers both gaps for the variables every log
//! shares (numbers, addresses, ids, paths, …): they are recognised on the first line, and
//! inside a token (`blk_<ID>`, `rhost=<IP>`, `core.<NUM>`), so the constant part of the
//! token survives into the template.
//!
//! The rules are hand-written scanners rather than regular expressions: one pass over the
//! line, no backtracking, no allocation beyond the output. That is most of why the miner
//! runs an order of magnitude faster than Drain3.
//!
//! Conventions, chosen to match how people annotate templates:
//! - a number is masked run by run, so `0.25` becomes `<NUM>.<NUM>` and a clock time
//!   `12:16:49` becomes `<NUM>:<NUM>:<NUM>`; digits glued to letters (`v2`, `tty2`,
//!   `x86_64`) are part of a word and stay;
//! - an address keeps its shape: `10.0.0.1:80` is `<IP>:<NUM>`, `db-1.example.com:5432` is
//!   `<HOST>:<NUM>`;
//! - an identifier with a word prefix keeps the prefix: `blk_-42`, `attempt_1_0020_m_3`
//!   and `part-00011` become `blk_<ID>`, `attempt_<ID>`, `part-<ID>`.
//!
//! The rule set is versioned ([`MASKING_VERSION`]): any change to what the default rules
//! produce must bump it, because templates mined under different rules differ, and the
//! logminer starts a new masking epoch when the version changes.

use super::config::MaskingConfig;
use xxhash_rust::xxh3::xxh3_64;

const WILDCARD: &str = "<*>";
const GAP: &str = "<...>";

/// The version of the default rule set. Bump it whenever a default rule changes what it
/// masks or how.
pub const MASKING_VERSION: &str = "tayga-mask-2";

/// The built-in rules, by the name used in `masking.disable`, with their placeholder, in
/// the order they are tried at a position.
pub const BUILTIN_RULES: &[(&str, &str)] = &[
    ("url", "<URL>"),
    ("email", "<EMAIL>"),
    ("uuid", "<UUID>"),
    ("mac", "<MAC>"),
    ("time", "<HH>:<MM>:<SS>"),
    ("ip", "<IP>"),
    ("hex", "<HEX>"),
    ("host", "<HOST>"),
    ("path", "<PATH>"),
    ("id", "<ID>"),
    ("date", "<DATE>"),
    ("duration", "<DURATION>"),
    ("size", "<SIZE>"),
    ("kv", "<VALUE>"),
    ("num", "<NUM>"),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
enum Rule {
    Url = 0,
    Email,
    Uuid,
    Mac,
    Time,
    Ip,
    Hex,
    Host,
    Path,
    Id,
    Date,
    Duration,
    Size,
    Kv,
    Num,
}

impl Rule {
    fn placeholder(self) -> &'static str {
        BUILTIN_RULES[self as usize].1
    }
}

const RULE_COUNT: usize = 15;

/// Why a masking configuration was refused.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum MaskingError {
    #[error("unknown masking rule {0:?} in masking.disable (known rules: url, email, uuid, mac, time, ip, hex, host, path, id, date, duration, size, kv, num)")]
    UnknownRule(String),
    #[error("custom masking rule {name:?}: {reason}")]
    BadCustomRule { name: String, reason: String },
}

/// Masks lines with the built-in rules (minus the disabled ones) and the custom rules.
/// Cheap to clone; holds no per-line state, so one masker can serve every service.
#[derive(Clone, Debug)]
pub struct Masker {
    enabled: bool,
    rules: [bool; RULE_COUNT],
    custom: Vec<Glob>,
    version: String,
}

impl Default for Masker {
    fn default() -> Self {
        Masker::new(&MaskingConfig::default()).expect("the default masking config is valid")
    }
}

impl Masker {
    pub fn new(config: &MaskingConfig) -> Result<Masker, MaskingError> {
        let mut rules = [true; RULE_COUNT];
        let mut disabled: Vec<&str> = Vec::new();
        for name in &config.disable {
            let idx = BUILTIN_RULES
                .iter()
                .position(|(n, _)| n == name)
                .ok_or_else(|| MaskingError::UnknownRule(name.clone()))?;
            rules[idx] = false;
            disabled.push(BUILTIN_RULES[idx].0);
        }
        let custom = config.custom.iter().map(Glob::compile).collect::<Result<Vec<_>, _>>()?;

        // The version names what the rules produce, so a config that changes the rules
        // changes the version (and starts a new masking epoch in the logminer), while
        // listing the same rules in another order does not.
        let version = if !config.enabled {
            "none".to_string()
        } else if disabled.is_empty() && custom.is_empty() {
            MASKING_VERSION.to_string()
        } else {
            disabled.sort_unstable();
            disabled.dedup();
            let mut desc = String::new();
            for d in &disabled {
                desc.push('-');
                desc.push_str(d);
                desc.push('\u{1f}');
            }
            for c in &config.custom {
                desc.push('+');
                desc.push_str(&c.pattern);
                desc.push('\u{1f}');
                desc.push_str(&c.placeholder);
                desc.push('\u{1e}');
            }
            format!("{MASKING_VERSION}+{:016x}", xxh3_64(desc.as_bytes()))
        };
        Ok(Masker { enabled: config.enabled, rules, custom, version })
    }

    /// The value the logminer records as `masking_version`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Returns the masked line: words separated by single spaces, variables replaced by
    /// placeholders.
    pub fn mask(&self, line: &str) -> String {
        let mut out = String::with_capacity(line.len());
        self.mask_into(line, &mut out);
        out
    }

    /// Like [`Masker::mask`], into a caller's buffer (cleared first).
    pub fn mask_into(&self, line: &str, out: &mut String) {
        self.mask_tokens(line, out, None);
    }

    /// Like [`Masker::mask_into`], but appends to `out` (a batch of masked lines in one
    /// buffer, with no copy through a line's own).
    pub fn mask_append(&self, line: &str, out: &mut String) {
        let base = out.len();
        self.mask_at(line, out, base, None);
    }

    /// Masks into `out` and, when given `spans`, records where each token of the result
    /// starts and ends, so the miner does not split the line again.
    pub(crate) fn mask_tokens(&self, line: &str, out: &mut String, spans: Option<&mut Vec<(u32, u32)>>) {
        out.clear();
        self.mask_at(line, out, 0, spans);
    }

    /// Appends the masked line to `out`, whose first `base` bytes are not the line's (the
    /// spans count from there). One pass finds the words and their character classes;
    /// plain words are copied as they are.
    fn mask_at(&self, line: &str, out: &mut String, base: usize, mut spans: Option<&mut Vec<(u32, u32)>>) {
        if let Some(s) = spans.as_deref_mut() {
            s.clear();
        }
        let b = line.as_bytes();
        let mut cur = next_word(b, 0);
        let mut prev: &str = "";
        let mut first = true;
        let mut escaped: String;
        while let Some((s, e, classes)) = cur {
            let mut word = &line[s..e];
            // A line that spells a learned wildcard must not become one once its template
            // is stored and restored: `<*>` and `<...>` in the input are escaped.
            if classes & LT != 0 && (word.contains(WILDCARD) || word.contains(GAP)) {
                escaped = word.replace(WILDCARD, "<\\*>").replace(GAP, "<\\...>");
                word = &escaped;
            }
            let mut next = next_word(b, e);
            if !first {
                out.push(' ');
            }
            first = false;
            let start = (out.len() - base) as u32;
            let next_str = next.map(|(ns, ne, _)| &line[ns..ne]);
            if !self.enabled {
                out.push_str(word);
            } else if !self.custom.is_empty() && self.apply_custom(word, out) {
            } else if classes & DIGIT == 0 && !b[s].is_ascii_uppercase() && b[s] != b'[' && b[s] != b'(' {
                // Fast path: no rule can match a word with no digit that does not start
                // like a date name (the common word), and a multi-word time needs one.
                if classes & MASKABLE == 0 {
                    out.push_str(word);
                } else {
                    self.mask_word(word, classes, out);
                }
            } else if self.on(Rule::Time) && starts_time_phrase(word, next_str) && {
                if let Some((end, word_end)) = time_phrase(b, s) {
                    push_time(&line[s..end], out);
                    out.push_str(&line[end..word_end]);
                    next = next_word(b, word_end);
                    true
                } else {
                    false
                }
            } {
            } else if classes & DIGIT != 0 && self.on(Rule::Size) && self.spaced_size(word, next_str, out) {
                next = next.and_then(|(_, ne, _)| next_word(b, ne));
            } else if b[s].is_ascii_uppercase() && self.on(Rule::Date) && self.date_word(prev, word, next_str, out) {
            } else if classes & MASKABLE == 0 {
                out.push_str(word);
            } else {
                self.mask_word(word, classes, out);
            }
            if let Some(sp) = spans.as_deref_mut() {
                sp.push((start, (out.len() - base) as u32));
            }
            prev = &line[s..e];
            cur = next;
        }
    }

    /// A size written with a space, `5.2 KB`, is one variable: the two words become one
    /// `<SIZE>` token, so the template reads `size <SIZE>` whether or not the writer put
    /// a space before the unit. `bytes` stays a word: after a plain count it says what is
    /// counted.
    fn spaced_size(&self, word: &str, next: Option<&str>, out: &mut String) -> bool {
        let Some(next) = next else { return false };
        if !word.as_bytes().last().is_some_and(u8::is_ascii_digit)
            || !next.as_bytes()[0].is_ascii_uppercase() && next.as_bytes()[0] != b'k'
        {
            return false;
        }
        let lead = word.len() - word.trim_start_matches(['(', '[']).len();
        let num = &word[lead..];
        let b = num.as_bytes();
        let int = run(b, 0, |c| c.is_ascii_digit());
        let end = if int > 0 && b.get(int) == Some(&b'.') { run(b, int + 1, |c| c.is_ascii_digit()) } else { int };
        if int == 0 || end != b.len() {
            return false;
        }
        let unit = next.trim_end_matches([',', ';', ')', ']', '.']);
        if !matches!(unit, "B" | "KB" | "kB" | "MB" | "GB" | "TB" | "PB" | "KiB" | "MiB" | "GiB" | "TiB") {
            return false;
        }
        out.push_str(&word[..lead]);
        out.push_str(Rule::Size.placeholder());
        out.push_str(&next[unit.len()..]);
        true
    }

    /// Month and weekday names are variables when they are part of a date, i.e. next to
    /// a number or to another such name (`Sat Jul  9 12:16:49 2005`, `9 May`), and words
    /// otherwise (`May I`, `Sun Microsystems`).
    fn date_word(&self, prev: &str, word: &str, next: Option<&str>, out: &mut String) -> bool {
        if !word.as_bytes()[0].is_ascii_uppercase() {
            return false;
        }
        let core = word.trim_end_matches([',', '.']);
        if !is_date_name(core) {
            return false;
        }
        let near = |w: &str| {
            let w = w.trim_start_matches(['(', '[']).trim_end_matches([',', '.']);
            w.as_bytes().first().is_some_and(u8::is_ascii_digit) || is_date_name(w)
        };
        if !(near(prev) || next.is_some_and(near)) {
            return false;
        }
        out.push_str(Rule::Date.placeholder());
        out.push_str(&word[core.len()..]);
        true
    }

    fn apply_custom(&self, word: &str, out: &mut String) -> bool {
        let (lead, core, trail) = split_core(word);
        if core.is_empty() {
            return false;
        }
        for glob in &self.custom {
            if glob.matches(core.as_bytes()) {
                out.push_str(lead);
                out.push_str(&glob.placeholder);
                out.push_str(trail);
                return true;
            }
        }
        false
    }

    fn mask_word(&self, word: &str, k: u16, out: &mut String) {
        let b = word.as_bytes();
        let mut i = 0;
        let mut copied = 0;
        while i < b.len() {
            let c = b[i];
            let word_char = is_word(c);
            // Inside a word (a letter or digit after another) nothing can start: this is
            // what keeps `v2` and `tty2` intact and makes the scan linear.
            if word_char && i > 0 && is_word(b[i - 1]) {
                i = skip_word(b, i + 1);
                continue;
            }
            if !word_char && !matches!(c, b'/' | b'.' | b'~' | b'-' | b'+' | b'=' | b':') {
                i += 1;
                continue;
            }
            if let Some(m) = self.match_at(b, i, k) {
                out.push_str(&word[copied..i + m.keep]);
                out.push_str(m.rule.placeholder());
                copied = m.end;
                i = m.end;
            } else if word_char {
                i = skip_word(b, i + 1);
            } else {
                i += 1;
            }
        }
        out.push_str(&word[copied..]);
    }

    fn on(&self, r: Rule) -> bool {
        self.rules[r as usize]
    }

    fn match_at(&self, b: &[u8], i: usize, k: u16) -> Option<Match> {
        let c = b[i];
        if c.is_ascii_alphanumeric() {
            // Most words are plain letters or plain digits followed by a space or simple
            // punctuation; only the characters below can continue a URL, e-mail, address,
            // path, id or hex value, so anything else skips the specific rules.
            let mut e = i;
            let mut kinds = 0u8;
            while e < b.len() {
                let k = ALNUM[b[e] as usize];
                if k == 0 {
                    break;
                }
                kinds |= k;
                e += 1;
            }
            let (letters, digits) = (kinds & 1 != 0, kinds & 2 != 0);
            let special = matches!(b.get(e), Some(b':' | b'.' | b'@' | b'_' | b'-' | b'/' | b'+' | b'\\'));
            if !(special || letters && digits) {
                if letters {
                    return None;
                }
                return if self.on(Rule::Num) && ends_at(b, e) { Some(Match::whole(Rule::Num, e)) } else { None };
            }
            if c.is_ascii_digit() {
                return self.match_specific(b, i, k).or_else(|| self.match_number(b, i));
            }
            return self.match_specific(b, i, k);
        }
        match c {
            b'/' if self.on(Rule::Path) => path_abs(b, i).map(|end| Match::whole(Rule::Path, end)),
            b'.' | b'~' if self.on(Rule::Path) => path_rel(b, i).map(|end| Match::whole(Rule::Path, end)),
            b'-' | b'+' if self.on(Rule::Num) && (i == 0 || !is_word(b[i - 1])) => {
                // A sign belongs to the number only at a word's edge: in `1-2` it is a
                // separator.
                if b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                    number(b, i + 1).map(|end| Match::whole(Rule::Num, end))
                } else {
                    None
                }
            }
            b'=' if self.on(Rule::Kv) && i > 0 && is_word(b[i - 1]) => self.match_kv(b, i, k),
            b':' if self.on(Rule::Ip) && b.get(i + 1) == Some(&b':') && (i == 0 || !is_word(b[i - 1])) => {
                ipv6(b, i).map(|end| Match::whole(Rule::Ip, end))
            }
            _ => None,
        }
    }

    /// The rules that recognise a whole variable by its shape, tried in a fixed order
    /// from the most to the least specific.
    /// The rules that recognise a whole variable by its shape, tried in a fixed order
    /// from the most to the least specific. `k`, the word's character classes, skips the
    /// rules whose punctuation the word does not have.
    fn match_specific(&self, b: &[u8], i: usize, k: u16) -> Option<Match> {
        let c = b[i];
        let has = |bits: u16| k & bits == bits;
        // Before the address rules: `2024-05-01T10:00:00Z` would otherwise read as a host
        // `2024-05-01T10` with a port, and every minute would make a template of its own.
        if c.is_ascii_digit() && k & (COLON | DASH | SLASH) != 0 && self.on(Rule::Time) {
            if let Some((end, clocked)) = timestamp(b, i) {
                return Some(Match::whole(if clocked { Rule::Time } else { Rule::Date }, end));
            }
        }
        if c.is_ascii_alphabetic() {
            if has(COLON | SLASH) && self.on(Rule::Url) {
                if let Some(m) = url(b, i) {
                    return Some(m);
                }
            }
            if has(AT) && self.on(Rule::Email) {
                if let Some(end) = email(b, i) {
                    return Some(Match::whole(Rule::Email, end));
                }
            }
            if has(BACKSLASH | COLON) && self.on(Rule::Path) {
                if let Some(end) = path_windows(b, i) {
                    return Some(Match::whole(Rule::Path, end));
                }
            }
        }
        if c.is_ascii_hexdigit() {
            if has(DASH) && self.on(Rule::Uuid) {
                if let Some(end) = uuid(b, i) {
                    return Some(Match::whole(Rule::Uuid, end));
                }
            }
            if (has(COLON) || has(DASH)) && self.on(Rule::Mac) {
                if let Some(end) = mac(b, i) {
                    return Some(Match::whole(Rule::Mac, end));
                }
            }
        }
        if self.on(Rule::Ip) {
            if has(DOT | DIGIT) {
                if let Some(end) = ipv4(b, i) {
                    return Some(Match::whole(Rule::Ip, end));
                }
            }
            if has(COLON) {
                if let Some(end) = ipv6(b, i) {
                    return Some(Match::whole(Rule::Ip, end));
                }
            }
        }
        if has(DIGIT) && self.on(Rule::Hex) {
            if let Some(end) = hex(b, i) {
                return Some(Match::whole(Rule::Hex, end));
            }
        }
        if k & (DOT | COLON | SLASH) != 0 && self.on(Rule::Host) {
            if let Some(end) = host(b, i) {
                return Some(Match::whole(Rule::Host, end));
            }
        }
        if c.is_ascii_alphabetic() && has(DASH | DIGIT) && self.on(Rule::Id) {
            if let Some(m) = prefixed_id(b, i) {
                return Some(m);
            }
        }
        None
    }

    fn match_number(&self, b: &[u8], i: usize) -> Option<Match> {
        if self.on(Rule::Duration) || self.on(Rule::Size) {
            if let Some((end, rule)) = quantity(b, i) {
                if self.on(rule) {
                    return Some(Match::whole(rule, end));
                }
            }
        }
        if self.on(Rule::Num) {
            return number(b, i).map(|end| Match::whole(Rule::Num, end));
        }
        None
    }

    /// `key=value`: a value that carries a digit is a variable as a whole, even when no
    /// finer rule knows its shape (`session=7f3a-b`, `node=r63-m0`). Values the finer rules
    /// cover entirely, and values without a digit (`user=root`, `mode=strict`, which are
    /// usually part of what the message says), are left to the normal scan.
    fn match_kv(&self, b: &[u8], eq: usize, k: u16) -> Option<Match> {
        let start = eq + 1;
        let mut end = start;
        while end < b.len()
            && !matches!(b[end], b',' | b';' | b'&' | b')' | b']' | b'}' | b'"' | b'\'' | b'>' | b'<' | b'=')
        {
            end += 1;
        }
        while end > start && matches!(b[end - 1], b'.' | b':') {
            end -= 1;
        }
        let value = &b[start..end];
        if value.is_empty() || !value.iter().any(u8::is_ascii_digit) || !value.iter().any(u8::is_ascii_alphabetic) {
            return None;
        }
        let covered = if b[start].is_ascii_digit() {
            self.match_specific(b, start, k).or_else(|| self.match_number(b, start))
        } else {
            self.match_at(b, start, k)
        };
        if covered.is_some_and(|m| m.end == end && m.keep == 0) {
            return None;
        }
        Some(Match { rule: Rule::Kv, keep: 1, end })
    }
}

/// A rule's hit at a position: the first `keep` bytes stay (a URL's scheme, an id's
/// prefix), the rest up to `end` becomes the rule's placeholder.
#[derive(Clone, Copy, Debug)]
struct Match {
    rule: Rule,
    keep: usize,
    end: usize,
}

impl Match {
    fn whole(rule: Rule, end: usize) -> Match {
        Match { rule, keep: 0, end }
    }
}

/// Strips what commonly surrounds a variable in a sentence: brackets, quotes, a trailing
/// comma or full stop.
fn split_core(word: &str) -> (&str, &str, &str) {
    let lead = word.len() - word.trim_start_matches(['(', '[', '{', '<', '"', '\'']).len();
    let rest = &word[lead..];
    let core = rest.trim_end_matches([')', ']', '}', '>', '"', '\'', ',', ';', ':', '.', '!', '?']);
    (&word[..lead], core, &rest[core.len()..])
}

mod glob;
mod scan;
#[cfg(test)]
mod tests;

use self::glob::Glob;
use self::scan::*;
