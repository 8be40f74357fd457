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

use super::config::{CustomRule, MaskingConfig};
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

fn is_date_name(w: &str) -> bool {
    matches!(
        w,
        "Jan"
            | "Feb"
            | "Mar"
            | "Apr"
            | "May"
            | "Jun"
            | "Jul"
            | "Aug"
            | "Sep"
            | "Sept"
            | "Oct"
            | "Nov"
            | "Dec"
            | "January"
            | "February"
            | "March"
            | "April"
            | "June"
            | "July"
            | "August"
            | "September"
            | "October"
            | "November"
            | "December"
            | "Mon"
            | "Tue"
            | "Wed"
            | "Thu"
            | "Fri"
            | "Sat"
            | "Sun"
            | "Monday"
            | "Tuesday"
            | "Wednesday"
            | "Thursday"
            | "Friday"
            | "Saturday"
            | "Sunday"
    )
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

/// Character classes, looked up once per byte while splitting a line into words; a
/// word's union of classes gates the rules that could match in it.
const DIGIT: u16 = 1;
const SLASH: u16 = 2;
const AT: u16 = 4;
const BACKSLASH: u16 = 8;
const DOT: u16 = 16;
const COLON: u16 = 32;
/// `-` and `_`.
const DASH: u16 = 64;
const SPACE: u16 = 128;
/// `<`: the word may spell a learned wildcard (`<*>`, `<...>`).
const LT: u16 = 256;
/// A word with none of these is copied as it is: no rule can match in it.
const MASKABLE: u16 = DIGIT | SLASH | AT | BACKSLASH | DOT | COLON;

const CLASS: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut c = b'0';
    while c <= b'9' {
        t[c as usize] = DIGIT;
        c += 1;
    }
    t[b'/' as usize] = SLASH;
    t[b'@' as usize] = AT;
    t[b'\\' as usize] = BACKSLASH;
    t[b'.' as usize] = DOT;
    t[b':' as usize] = COLON;
    t[b'<' as usize] = LT;
    t[b'-' as usize] = DASH;
    t[b'_' as usize] = DASH;
    // The ASCII whitespace of `u8::is_ascii_whitespace`.
    t[b' ' as usize] = SPACE;
    t[b'\t' as usize] = SPACE;
    t[b'\n' as usize] = SPACE;
    t[0x0C] = SPACE;
    t[b'\r' as usize] = SPACE;
    t
};

/// 1 for an ASCII letter, 2 for a digit.
const ALNUM: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if b.is_ascii_alphabetic() {
            1
        } else if b.is_ascii_digit() {
            2
        } else {
            0
        };
        c += 1;
    }
    t
};

/// The next word at or after `i`: its start, end and the union of its bytes' classes.
/// Not inlined: in `mask_tokens` the loop's accumulator was spilled to the stack, a
/// store per byte of every line.
#[inline(never)]
fn next_word(b: &[u8], mut i: usize) -> Option<(usize, usize, u16)> {
    while i < b.len() && CLASS[b[i] as usize] == SPACE {
        i += 1;
    }
    if i == b.len() {
        return None;
    }
    let start = i;
    let mut classes = 0;
    while i < b.len() {
        let c = CLASS[b[i] as usize];
        if c == SPACE {
            break;
        }
        classes |= c;
        i += 1;
    }
    Some((start, i, classes))
}

/// Letters, digits, `_` and any non-ASCII byte count as word characters: a variable
/// never starts or ends in the middle of one, and a multi-byte character is never split.
#[inline]
fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

#[inline]
fn skip_word(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_word(b[i]) {
        i += 1;
    }
    i
}

/// True when a variable may end before position `j`.
#[inline]
fn ends_at(b: &[u8], j: usize) -> bool {
    j >= b.len() || !is_word(b[j])
}

fn run(b: &[u8], i: usize, pred: impl Fn(u8) -> bool) -> usize {
    let mut j = i;
    while j < b.len() && pred(b[j]) {
        j += 1;
    }
    j
}

/// Digits, ending at a word boundary; a following `.5` is masked as a separate run.
fn number(b: &[u8], i: usize) -> Option<usize> {
    let j = run(b, i, |c| c.is_ascii_digit());
    (j > i && ends_at(b, j)).then_some(j)
}

/// A number with a unit: `250ms`, `1.5s`, `1h30m` (durations) or `64MB`, `2.5GiB` (sizes).
fn quantity(b: &[u8], i: usize) -> Option<(usize, Rule)> {
    let mut j = i;
    let mut rule = None;
    loop {
        let d = run(b, j, |c| c.is_ascii_digit());
        if d == j {
            break;
        }
        let mut k = d;
        if k + 1 < b.len() && b[k] == b'.' && b[k + 1].is_ascii_digit() {
            k = run(b, k + 1, |c| c.is_ascii_digit());
        }
        let u = run(b, k, |c| c.is_ascii_alphabetic());
        let kind = match &b[k..u] {
            b"ns" | b"us" | b"ms" | b"s" | b"sec" | b"secs" | b"m" | b"min" | b"mins" | b"h" | b"hr" | b"hrs"
            | b"d" => Rule::Duration,
            b"B" | b"K" | b"KB" | b"kB" | b"KiB" | b"M" | b"MB" | b"MiB" | b"G" | b"GB" | b"GiB" | b"T" | b"TB"
            | b"TiB" => Rule::Size,
            _ => break,
        };
        // `1h30m` is one duration; a size never chains.
        if rule.is_some_and(|r| r != kind || kind == Rule::Size) {
            break;
        }
        rule = Some(kind);
        j = u;
        if kind == Rule::Size {
            break;
        }
    }
    let rule = rule?;
    ends_at(b, j).then_some((j, rule))
}

/// Digits `n` long at `j`.
fn digits_at(b: &[u8], j: usize, n: usize) -> bool {
    j + n <= b.len() && b[j..j + n].iter().all(u8::is_ascii_digit)
}

/// A number from `lo` to `hi` written with exactly two digits at `j`.
fn two_digits_in(b: &[u8], j: usize, lo: u8, hi: u8) -> bool {
    digits_at(b, j, 2) && (lo..=hi).contains(&((b[j] - b'0') * 10 + (b[j + 1] - b'0')))
}

/// A clock time `H:MM:SS` or `HH:MM:SS`, with an optional fraction (`.123`, `,123`) and
/// zone (`Z`, `+02:00`, `-0700`); its end. Minutes and seconds alone (`00:05`) are as
/// often a duration or a ratio as a time, so the seconds are required.
fn clock(b: &[u8], i: usize) -> Option<usize> {
    let h = run(b, i, |c| c.is_ascii_digit());
    if h == i || h - i > 2 || b.get(h) != Some(&b':') || !two_digits_in(b, h + 1, 0, 59) {
        return None;
    }
    if b.get(h + 3) != Some(&b':') || !two_digits_in(b, h + 4, 0, 60) {
        return None;
    }
    let mut j = h + 6;
    if matches!(b.get(j), Some(b'.' | b',')) && b.get(j + 1).is_some_and(u8::is_ascii_digit) {
        let f = run(b, j + 1, |c| c.is_ascii_digit());
        if f - (j + 1) > 9 {
            return None;
        }
        j = f;
    }
    Some(zone(b, j))
}

/// After a clock time: `Z`, `+HH:MM`, `+HHMM` or `+HH` (or `-`), else nothing.
fn zone(b: &[u8], j: usize) -> usize {
    match b.get(j) {
        Some(b'Z') if ends_at(b, j + 1) => j + 1,
        Some(b'+' | b'-') if two_digits_in(b, j + 1, 0, 23) => {
            if b.get(j + 3) == Some(&b':') && two_digits_in(b, j + 4, 0, 59) {
                j + 6
            } else if two_digits_in(b, j + 3, 0, 59) {
                j + 5
            } else {
                j + 3
            }
        }
        _ => j,
    }
}

/// `YYYY-MM-DD` or `YYYY/MM/DD` at `i`: the end of the date.
fn iso_date(b: &[u8], i: usize) -> Option<usize> {
    let sep = *b.get(i + 4)?;
    let ok = digits_at(b, i, 4)
        && matches!(sep, b'-' | b'/')
        && two_digits_in(b, i + 5, 1, 12)
        && b.get(i + 7) == Some(&sep)
        && two_digits_in(b, i + 8, 1, 31)
        && !b.get(i + 10).is_some_and(u8::is_ascii_digit);
    ok.then_some(i + 10)
}

/// A time written as one word: an ISO 8601 / RFC 3339 date with or without a time
/// (`2024-05-01`, `2024-05-01T10:00:00.123+02:00`), a clock time (`08:14:03`,
/// `10:00:00,123`) or the common log format's `10/Oct/2000:13:55:36`: its end, and
/// whether it has a clock. Epoch seconds and milliseconds need nothing: they are one
/// number already.
fn timestamp(b: &[u8], i: usize) -> Option<(usize, bool)> {
    if let Some(d) = iso_date(b, i) {
        let (end, clocked) = if matches!(b.get(d), Some(b'T' | b't')) { (clock(b, d + 1)?, true) } else { (d, false) };
        return ends_at(b, end).then_some((end, clocked));
    }
    if digits_at(b, i, 2) && b.get(i + 2) == Some(&b'/') && b.len() >= i + 7 && b[i + 6] == b'/' {
        let month = std::str::from_utf8(&b[i + 3..i + 6]).ok()?;
        if is_date_name(month) && digits_at(b, i + 7, 4) && b.get(i + 11) == Some(&b':') {
            return clock(b, i + 12).filter(|&e| ends_at(b, e)).map(|e| (e, true));
        }
        return None;
    }
    clock(b, i).filter(|&e| ends_at(b, e)).map(|e| (e, true))
}

/// Could a time written over several words start with this word and the next? Cheap,
/// so that a common word costs a comparison or two.
#[inline]
fn starts_time_phrase(word: &str, next: Option<&str>) -> bool {
    let Some(next) = next else { return false };
    let mut core = word.as_bytes();
    while let [b'[' | b'(', rest @ ..] = core {
        core = rest;
    }
    if let [rest @ .., b','] = core {
        core = rest;
    }
    let Some(&first) = next.as_bytes().first() else { return false };
    match core.first() {
        // The initials of month and weekday names.
        Some(b'J' | b'F' | b'M' | b'A' | b'S' | b'O' | b'N' | b'D' | b'T' | b'W') => {
            (3..=9).contains(&core.len())
                && (first.is_ascii_digit() || first.is_ascii_uppercase())
                && std::str::from_utf8(core).is_ok_and(is_date_name)
        }
        Some(c) if c.is_ascii_digit() => {
            if core.len() <= 2 {
                first.is_ascii_uppercase() && core.iter().all(u8::is_ascii_digit)
            } else {
                core.len() == 10 && first.is_ascii_digit() && iso_date(core, 0) == Some(10)
            }
        }
        _ => false,
    }
}

const ZONES: &[&str] = &[
    "UTC", "GMT", "Z", "CET", "CEST", "EET", "EEST", "WET", "BST", "EST", "EDT", "CST", "CDT", "MST", "MDT", "PST",
    "PDT", "JST", "KST", "HKT", "AEST", "AEDT",
];

/// A time written over several words, as one variable: syslog's `Dec  1 08:14:03`,
/// `ctime`'s `Sat Jul  9 12:16:49 2005`, RFC 2822's `Tue, 01 May 2024 10:00:00 GMT`, and
/// an ISO date and a clock time apart (`2024-05-01 10:00:00,123`). A clock time is
/// required, so `9 May` and `Sun Microsystems` stay as they are. Returns where the last
/// word's core ends (its closing brackets and punctuation stay outside the variable) and
/// where the word ends.
#[inline(never)]
fn time_phrase(b: &[u8], start: usize) -> Option<(usize, usize)> {
    // Up to 8 words: weekday, month, day, year, time, year, zone, year.
    let mut words: [(usize, usize); 8] = [(0, 0); 8];
    let mut n = 0;
    let mut at = start;
    while n < words.len() {
        let Some((s, e, _)) = next_word(b, at) else { break };
        words[n] = (s, e);
        n += 1;
        at = e;
    }
    let words = &words[..n];
    // The word's core: brackets stripped at the first word's start, `,` allowed at the end
    // of every word but the last, whose trailing punctuation ends the phrase.
    let core = |k: usize, last: bool| -> &[u8] {
        let (s, e) = words[k];
        let mut w = &b[s..e];
        if k == 0 {
            while let [b'[' | b'(', rest @ ..] = w {
                w = rest;
            }
        }
        let strip: &[u8] = if last { b",.;)]" } else { b"," };
        while let [rest @ .., c] = w {
            if strip.contains(c) {
                w = rest;
            } else {
                break;
            }
        }
        w
    };
    let name = |w: &[u8]| std::str::from_utf8(w).is_ok_and(is_date_name);
    let weekday =
        |w: &[u8]| name(w) && matches!(w.get(..3), Some(b"Mon" | b"Tue" | b"Wed" | b"Thu" | b"Fri" | b"Sat" | b"Sun"));
    let month = |w: &[u8]| name(w) && !weekday(w);
    let day = |w: &[u8]| (1..=2).contains(&w.len()) && w.iter().all(u8::is_ascii_digit);
    let year = |w: &[u8]| w.len() == 4 && w.iter().all(u8::is_ascii_digit);
    let is_clock = |w: &[u8]| clock(w, 0) == Some(w.len());
    let is_zone = |w: &[u8]| {
        std::str::from_utf8(w).is_ok_and(|z| ZONES.contains(&z))
            || matches!(w.first(), Some(b'+' | b'-')) && w.len() == 5 && w[1..].iter().all(u8::is_ascii_digit)
    };
    // Matches a sequence of word tests, the optional ones marked; returns the words used.
    type WordTest<'t> = (&'t dyn Fn(&[u8]) -> bool, bool);
    let matches = |pattern: &[WordTest<'_>]| -> Option<usize> {
        let mut k = 0;
        let mut clocked = false;
        for (test, optional) in pattern {
            let ok = k < words.len() && (test(core(k, false)) || test(core(k, true)));
            if ok {
                clocked |= is_clock(core(k, true)) || is_clock(core(k, false));
                k += 1;
            } else if !optional {
                return None;
            }
        }
        (clocked && k > 1).then_some(k)
    };
    let iso = |w: &[u8]| iso_date(w, 0) == Some(w.len());
    let used = matches(&[
        (&weekday, true),
        (&month, false),
        (&day, false),
        (&year, true),
        (&is_clock, false),
        (&year, true),
        (&is_zone, true),
        (&year, true),
    ])
    .or_else(|| {
        matches(&[
            (&weekday, true),
            (&day, false),
            (&month, false),
            (&year, false),
            (&is_clock, false),
            (&is_zone, true),
        ])
    })
    .or_else(|| matches(&[(&iso, false), (&is_clock, false), (&is_zone, true)]))?;
    // Only the last word may carry closing punctuation; earlier words may end in `,`.
    for (k, &(s, e)) in words.iter().enumerate().take(used - 1) {
        let first = if k == 0 { core(0, false).as_ptr() as usize - b.as_ptr() as usize } else { s };
        let w = &b[first..e];
        if w.iter().any(|c| matches!(c, b')' | b']' | b'(' | b'[')) {
            return None;
        }
    }
    let (s, e) = words[used - 1];
    let last = core(used - 1, true);
    Some((last.as_ptr() as usize - b.as_ptr() as usize + last.len(), e)).filter(|&(end, _)| end >= s)
}

/// Writes a time phrase as `<TIME>`, keeping the brackets before it.
fn push_time(phrase: &str, out: &mut String) {
    let lead = phrase.len() - phrase.trim_start_matches(['[', '(']).len();
    out.push_str(&phrase[..lead]);
    out.push_str(Rule::Time.placeholder());
}

fn ipv4(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    for octet in 0..4 {
        if octet > 0 {
            if b.get(j) != Some(&b'.') {
                return None;
            }
            j += 1;
        }
        let d = run(b, j, |c| c.is_ascii_digit());
        if d == j || d - j > 3 {
            return None;
        }
        j = d;
    }
    // `1.2.3.4.5` is a version, not an address.
    if b.get(j) == Some(&b'.') && b.get(j + 1).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    ends_at(b, j).then_some(j)
}

/// IPv6 needs `::` or eight groups, so clock times (`12:16:49`) and `key:value` never
/// qualify.
fn ipv6(b: &[u8], i: usize) -> Option<usize> {
    let j = run(b, i, |c| c.is_ascii_hexdigit() || c == b':');
    let s = &b[i..j];
    let colons = s.iter().filter(|&&c| c == b':').count();
    let double = s.windows(2).any(|w| w == b"::");
    if colons < 2 || !(double || colons == 7) || s.ends_with(b":") && !s.ends_with(b"::") {
        return None;
    }
    let mut groups = 0;
    for g in s.split(|&c| c == b':') {
        if g.len() > 4 {
            return None;
        }
        groups += usize::from(!g.is_empty());
    }
    (groups >= 1 && ends_at(b, j)).then_some(j)
}

fn uuid(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    for (n, len) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if n > 0 {
            if b.get(j) != Some(&b'-') {
                return None;
            }
            j += 1;
        }
        let e = run(b, j, |c| c.is_ascii_hexdigit());
        if e - j != len {
            return None;
        }
        j = e;
    }
    ends_at(b, j).then_some(j)
}

fn mac(b: &[u8], i: usize) -> Option<usize> {
    let sep = *b.get(i + 2)?;
    if sep != b':' && sep != b'-' {
        return None;
    }
    let mut j = i;
    for n in 0..6 {
        if n > 0 {
            if b.get(j) != Some(&sep) {
                return None;
            }
            j += 1;
        }
        if run(b, j, |c| c.is_ascii_hexdigit()) != j + 2 {
            return None;
        }
        j += 2;
    }
    ends_at(b, j).then_some(j)
}

/// `0x…`, or a bare run of at least 8 hex digits that mixes digits and letters (a hash,
/// an address): all-digit runs are numbers, all-letter runs are words.
fn hex(b: &[u8], i: usize) -> Option<usize> {
    if b[i] == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X')) {
        let j = run(b, i + 2, |c| c.is_ascii_hexdigit());
        return (j > i + 2 && ends_at(b, j)).then_some(j);
    }
    let j = run(b, i, |c| c.is_ascii_hexdigit());
    let s = &b[i..j];
    if s.len() >= 8 && s.iter().any(u8::is_ascii_digit) && s.iter().any(u8::is_ascii_alphabetic) && ends_at(b, j) {
        return Some(j);
    }
    None
}

const TLDS: &[&[u8]] = &[
    b"com",
    b"net",
    b"org",
    b"edu",
    b"gov",
    b"mil",
    b"io",
    b"us",
    b"uk",
    b"de",
    b"fr",
    b"jp",
    b"cn",
    b"hk",
    b"ru",
    b"br",
    b"au",
    b"ca",
    b"nl",
    b"eu",
    b"ch",
    b"se",
    b"es",
    b"kr",
    b"tw",
    b"internal",
    b"corp",
    b"arpa",
];

const SOURCE_EXTENSIONS: &[&[u8]] = &[
    b"java", b"py", b"go", b"rs", b"c", b"cc", b"cpp", b"cxx", b"h", b"hpp", b"js", b"ts", b"rb", b"scala", b"kt",
    b"cs", b"php", b"swift", b"m", b"pl", b"ex", b"exs", b"erl",
];

/// A host name, recognised by context: followed by a port (`db-1:5432`), by `/IP` (Java's
/// `host/10.0.0.1:80`), or ending in a well-known top-level domain (`cp-1.utah.example.us`).
/// Dotted words are otherwise left alone: `org.apache.Foo`, `android.intent.action.X` and
/// `Client.java:1475` are code, not hosts.
fn host(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    let mut labels = 0;
    let mut last_label;
    loop {
        let e = run(b, j, |c| c.is_ascii_alphanumeric() || c == b'-');
        if e == j {
            return None;
        }
        labels += 1;
        last_label = (j, e);
        j = e;
        if b.get(j) == Some(&b'.') && b.get(j + 1).is_some_and(u8::is_ascii_alphanumeric) {
            j += 1;
        } else {
            break;
        }
    }
    let name = &b[i..j];
    if !name.iter().any(u8::is_ascii_alphabetic) || name.first() == Some(&b'-') {
        return None;
    }
    let last = &b[last_label.0..last_label.1];
    match b.get(j) {
        Some(b':') => {
            let p = run(b, j + 1, |c| c.is_ascii_digit());
            let port_ok = p > j + 1 && p - (j + 1) <= 5 && ends_at(b, p);
            let hostlike = labels > 1 || name.contains(&b'-') || name == b"localhost";
            let code = labels > 1 && SOURCE_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(last));
            (port_ok && hostlike && !code).then_some(j)
        }
        Some(b'/') => ipv4(b, j + 1).map(|_| j),
        _ => {
            let tld = labels > 1 && TLDS.iter().any(|t| t.eq_ignore_ascii_case(last));
            (tld && ends_at(b, j)).then_some(j)
        }
    }
}

fn email(b: &[u8], i: usize) -> Option<usize> {
    let at = run(b, i, |c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'%' | b'+' | b'-'));
    if at == i || b.get(at) != Some(&b'@') {
        return None;
    }
    let mut j = at + 1;
    let mut labels = 0;
    let mut last;
    loop {
        let e = run(b, j, |c| c.is_ascii_alphanumeric() || c == b'-');
        if e == j {
            return None;
        }
        labels += 1;
        last = (j, e);
        j = e;
        if b.get(j) == Some(&b'.') && b.get(j + 1).is_some_and(u8::is_ascii_alphanumeric) {
            j += 1;
        } else {
            break;
        }
    }
    let tld = &b[last.0..last.1];
    (labels >= 2 && tld.len() >= 2 && tld.iter().all(u8::is_ascii_alphabetic) && ends_at(b, j)).then_some(j)
}

/// `scheme://rest`: the scheme stays (it says what kind of address it is), the rest is
/// the variable.
fn url(b: &[u8], i: usize) -> Option<Match> {
    let s = run(b, i, |c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'.' | b'-'));
    if !b[s..].starts_with(b"://") {
        return None;
    }
    let start = s + 3;
    let end = path_end(b, start);
    (end > start).then_some(Match { rule: Rule::Url, keep: start - i, end })
}

/// Where a path or URL ends: at a quote or closing bracket, without trailing
/// sentence punctuation.
fn path_end(b: &[u8], i: usize) -> usize {
    let mut j = run(b, i, |c| !matches!(c, b'"' | b'\'' | b'<' | b'>' | b')' | b']' | b'}' | b',' | b';' | b'|'));
    while j > i && matches!(b[j - 1], b'.' | b':') {
        j -= 1;
    }
    j
}

/// An absolute path of at least two components (`/var/log/x`); a single component
/// (`/default-rack`) is as often a name as a path, and `/10.0.0.1` is an address.
fn path_abs(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && (is_word(b[i - 1]) || matches!(b[i - 1], b'/' | b'.')) {
        return None;
    }
    let first = *b.get(i + 1)?;
    if !(first.is_ascii_alphabetic() || matches!(first, b'_' | b'.' | b'~' | b'-')) {
        return None;
    }
    // One pass: the end (at a quote, bracket, `:` or the word's end, less trailing `.`)
    // and the number of non-empty components.
    let mut j = i;
    let mut comps = 0;
    while j < b.len() && !matches!(b[j], b'"' | b'\'' | b'<' | b'>' | b')' | b']' | b'}' | b',' | b';' | b'|' | b':') {
        if b[j] == b'/'
            && j + 1 < b.len()
            && !matches!(b[j + 1], b'/' | b'"' | b'\'' | b'<' | b'>' | b')' | b']' | b'}' | b',' | b';' | b'|' | b':')
        {
            comps += 1;
        }
        j += 1;
    }
    while j > i && b[j - 1] == b'.' {
        j -= 1;
    }
    (comps >= 2).then_some(j)
}

/// Paths stop at `:` too, so `/src/a.c:12` keeps its line number apart.
fn path_end_colon(b: &[u8], i: usize) -> usize {
    let end = path_end(b, i);
    b[i..end].iter().position(|&c| c == b':').map_or(end, |p| i + p)
}

/// `./x`, `../x/y`, `~/x`.
fn path_rel(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && is_word(b[i - 1]) {
        return None;
    }
    let rest = &b[i..];
    let prefix = if rest.starts_with(b"../") {
        3
    } else if rest.starts_with(b"./") || rest.starts_with(b"~/") {
        2
    } else {
        return None;
    };
    let end = path_end_colon(b, i);
    (end > i + prefix && (is_word(b[i + prefix]) || b[i + prefix] == b'.')).then_some(end)
}

/// `C:\dir\file`.
fn path_windows(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i + 1) == Some(&b':') && b.get(i + 2) == Some(&b'\\') {
        let end = path_end_colon(b, i + 2);
        return (end > i + 3).then_some(end);
    }
    None
}

/// An identifier made of a word prefix and a numeric tail: `blk_-42`, `job_2015_0020`,
/// `part-00011`, `DFSClient_NONMAPREDUCE_15_1`. The prefix (letters only, so `x86_64` is
/// not split) says what the id names; everything from the first digit-led segment to the
/// end of the identifier is the variable.
fn prefixed_id(b: &[u8], i: usize) -> Option<Match> {
    let mut j = i;
    loop {
        let e = run(b, j, |c| c.is_ascii_alphabetic());
        if e == j {
            return None;
        }
        if !matches!(b.get(e), Some(b'_' | b'-')) {
            return None;
        }
        let tail = e + 1;
        let digit_at = if b.get(tail) == Some(&b'-') { tail + 1 } else { tail };
        if b.get(digit_at).is_some_and(u8::is_ascii_digit) {
            let end = run(b, tail, |c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'));
            let mut end = end;
            while b[end - 1] == b'-' || b[end - 1] == b'_' {
                end -= 1;
            }
            return ends_at(b, end).then_some(Match { rule: Rule::Id, keep: tail - i, end });
        }
        j = tail;
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

/// A compiled custom-rule glob.
#[derive(Clone, Debug)]
struct Glob {
    parts: Vec<GlobPart>,
    placeholder: String,
}

#[derive(Clone, Debug, PartialEq)]
enum GlobPart {
    Star,
    One,
    Digits,
    HexDigits,
    Lit(u8),
}

impl Glob {
    fn compile(rule: &CustomRule) -> Result<Glob, MaskingError> {
        let bad = |reason: &str| MaskingError::BadCustomRule { name: rule.name.clone(), reason: reason.to_string() };
        if rule.pattern.is_empty() {
            return Err(bad("empty pattern"));
        }
        if rule.pattern.bytes().any(|c| c.is_ascii_whitespace()) {
            return Err(bad("a pattern matches one word and cannot contain whitespace"));
        }
        let ph = &rule.placeholder;
        let well_formed = ph.len() > 2
            && ph.starts_with('<')
            && ph.ends_with('>')
            && !ph[1..ph.len() - 1].contains(['<', '>'])
            && !ph.bytes().any(|c| c.is_ascii_whitespace());
        if !well_formed {
            return Err(bad("placeholder must look like <NAME>"));
        }
        if ph == "<*>" {
            return Err(bad("<*> is reserved for the wildcards Drain learns"));
        }
        let parts = rule
            .pattern
            .bytes()
            .map(|c| match c {
                b'*' => GlobPart::Star,
                b'?' => GlobPart::One,
                b'#' => GlobPart::Digits,
                b'%' => GlobPart::HexDigits,
                c => GlobPart::Lit(c),
            })
            .collect();
        Ok(Glob { parts, placeholder: ph.clone() })
    }

    fn matches(&self, s: &[u8]) -> bool {
        glob_match(&self.parts, s)
    }
}

/// Whether the glob matches the whole of `s`. The set of positions of `s` reachable
/// after each part is carried forward, so the time is parts × bytes whatever the pattern:
/// trying each star's every length in turn is exponential in the stars (`*****…x`, one
/// operator's typo, stalled the miner for seconds on one word).
fn glob_match(p: &[GlobPart], s: &[u8]) -> bool {
    let mut reach = vec![false; s.len() + 1];
    reach[0] = true;
    let mut next = vec![false; s.len() + 1];
    for part in p {
        next.fill(false);
        match part {
            GlobPart::Lit(c) => {
                for j in 0..s.len() {
                    next[j + 1] = reach[j] && s[j] == *c;
                }
            }
            GlobPart::One => next[1..=s.len()].copy_from_slice(&reach[..s.len()]),
            GlobPart::Star => {
                if let Some(first) = reach.iter().position(|&r| r) {
                    next[first..].fill(true);
                }
            }
            GlobPart::Digits | GlobPart::HexDigits => {
                let ok = |c: u8| if *part == GlobPart::Digits { c.is_ascii_digit() } else { c.is_ascii_hexdigit() };
                // One or more: a run may start at any reachable position and go on while
                // the bytes qualify.
                for j in 1..=s.len() {
                    next[j] = ok(s[j - 1]) && (reach[j - 1] || next[j - 1]);
                }
            }
        }
        std::mem::swap(&mut reach, &mut next);
        if !reach.contains(&true) {
            return false;
        }
    }
    reach[s.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(line: &str) -> String {
        Masker::default().mask(line)
    }

    #[test]
    fn numbers_are_masked_run_by_run() {
        assert_eq!(m("took 12 ms, progress 0.25"), "took <NUM> ms, progress <NUM>.<NUM>");
        assert_eq!(m("at 12:16:49 on 2013-10-17"), "at <HH>:<MM>:<SS> on <DATE>");
        assert_eq!(m("ratio 12:16 and 1-2-3"), "ratio <NUM>:<NUM> and <NUM>-<NUM>-<NUM>");
        assert_eq!(m("vCores:-27 boot = -107"), "vCores:<NUM> boot = <NUM>");
        assert_eq!(m("core.4900 (TID 1340)."), "core.<NUM> (TID <NUM>).");
    }

    #[test]
    fn digits_inside_words_stay() {
        assert_eq!(m("v2 tty2 x86_64 subdir24 log4j"), "v2 tty2 x86_64 subdir24 log4j");
        assert_eq!(m("mapreduce.v2.api.MRClientProtocolPB"), "mapreduce.v2.api.MRClientProtocolPB");
    }

    #[test]
    fn addresses_keep_their_shape() {
        assert_eq!(m("from /10.250.19.102:54106"), "from /<IP>:<NUM>");
        assert_eq!(m("10.251.30.85:50010:Got exception"), "<IP>:<NUM>:Got exception");
        assert_eq!(m("rhost=218.22.3.51 user=root"), "rhost=<IP> user=root");
        assert_eq!(m("proxy.cse.cuhk.edu.hk:5070 open"), "<HOST>:<NUM> open");
        assert_eq!(
            m("Old: msra-sa-41/10.190.173.170:9000 New: msra-sa-41:9000"),
            "Old: <HOST>/<IP>:<NUM> New: <HOST>:<NUM>"
        );
        assert_eq!(m("(lns-45-tou.adsl.proxad.net)"), "(<HOST>)");
        assert_eq!(m("at Client.call(Client.java:1475)"), "at Client.call(Client.java:<NUM>)");
        assert_eq!(m("PendingReds:0 org.apache.hadoop.Foo"), "PendingReds:<NUM> org.apache.hadoop.Foo");
        assert_eq!(m("peer fe80::1ff:fe23:4567:890a and ::1"), "peer <IP> and <IP>");
        assert_eq!(m("at 12:16:49"), "at <HH>:<MM>:<SS>");
        assert_eq!(m("hw 00:1a:2b:3c:4d:5e"), "hw <MAC>");
        assert_eq!(m("mail bob.smith@example.com now"), "mail <EMAIL> now");
    }

    #[test]
    fn ids_keep_their_prefix() {
        assert_eq!(m("blk_-1781953582842324563 terminating"), "blk_<ID> terminating");
        assert_eq!(m("attempt_1445144423722_0020_m_000009_0"), "attempt_<ID>");
        assert_eq!(m("[DFSClient_NONMAPREDUCE_1537864556_1]"), "[DFSClient_NONMAPREDUCE_<ID>]");
        assert_eq!(m("part-00590. rdd_21_0"), "part-<ID>. rdd_<ID>");
        assert_eq!(m("instance b9000564-fe1a-409b-b8cc-1e88b294cd1d"), "instance <UUID>");
        assert_eq!(m("iar 00106570 dear 0247a8b8 mask 0x05"), "iar <NUM> dear <HEX> mask <HEX>");
        assert_eq!(m("deadbeef cafe12 cafe1234"), "deadbeef cafe12 <HEX>");
    }

    #[test]
    fn paths_and_urls() {
        assert_eq!(m("file /mnt/hadoop/dfs/blk_1"), "file <PATH>");
        assert_eq!(m("at (/var/lib/nova/_base/a4): checking"), "at (<PATH>): checking");
        assert_eq!(m("Resolved host to /default-rack"), "Resolved host to /default-rack");
        assert_eq!(m("Input split: hdfs://host:9000/pjhe/test/1/file.txt:0+1"), "Input split: hdfs://<URL>");
        assert_eq!(m("see ./conf/app.toml and ~/x and C:\\Windows\\sys"), "see <PATH> and <PATH> and <PATH>");
        assert_eq!(m("\"GET /v2/54fadb/servers/detail HTTP/1.1\""), "\"GET <PATH> HTTP/<NUM>.<NUM>\"");
        assert_eq!(m("src/a.c:12"), "src/a.c:<NUM>");
    }

    #[test]
    fn learned_wildcards_in_input_are_escaped() {
        assert_eq!(m("match <*> and <...> or a<*>b"), "match <\\*> and <\\...> or a<\\*>b");
        assert_eq!(Masker::new(&MaskingConfig { enabled: false, ..Default::default() }).unwrap().mask("<*>"), "<\\*>");
    }

    #[test]
    fn dates() {
        assert_eq!(m("at Sat Jul  9 12:16:49 2005"), "at <HH>:<MM>:<SS>");
        assert_eq!(m("on 9 May, then"), "on <NUM> <DATE>, then");
        assert_eq!(m("May I help, Sun Microsystems"), "May I help, Sun Microsystems");
        assert_eq!(m("Sat Jul 9 and Mon"), "<DATE> <DATE> <NUM> and Mon");
    }

    #[test]
    fn times_are_one_variable_whatever_their_format() {
        for t in [
            "2024-05-01T10:00:00Z",
            "2024-05-01T10:59:59.123Z",
            "2024-05-01T10:00:00.123456789+02:00",
            "2024-05-01T10:00:00-0700",
            "2024-05-01t10:00:00",
            "2024-05-01",
            "2024/05/01",
            "08:14:03",
            "8:14:03",
            "10:00:00,123",
            "10:00:00.5",
            "10/Oct/2000:13:55:36",
            "Dec  1 08:14:03",
            "Dec 1 08:14:03",
            "Sat Jul  9 12:16:49 2005",
            "Tue, 01 May 2024 10:00:00 GMT",
            "Tue May 1 10:00:00 UTC 2024",
            "2024-05-01 10:00:00,123",
            "2024-05-01 10:00:00 +0000",
        ] {
            let t = t.to_string();
            let p = if t.contains(':') { "<HH>:<MM>:<SS>" } else { "<DATE>" };
            assert_eq!(m(&format!("job started at {t} ok")), format!("job started at {p} ok"), "{t}");
            assert_eq!(m(&format!("[{t}] ok")), format!("[{p}] ok"), "{t}");
            assert_eq!(m(&format!("(at {t}).")), format!("(at {p})."), "{t}");
        }
        // Epoch seconds and milliseconds are numbers already: one variable.
        assert_eq!(m("ts 1714557600 ms 1714557600123 s 1714557600.123"), "ts <NUM> ms <NUM> s <NUM>.<NUM>");
        assert_eq!(m("ts=2024-05-01T10:00:00Z"), "ts=<HH>:<MM>:<SS>");
        // Not times: too few parts, out of range, or part of a word.
        assert_eq!(m("lifetime 00:05 at 25:61:00"), "lifetime <NUM>:<NUM> at <NUM>:<NUM>:<NUM>");
        assert_eq!(m("on 2024-13-01"), "on <NUM>-<NUM>-<NUM>");
        assert_eq!(m("Dec 1 was"), "<DATE> <NUM> was");
    }

    #[test]
    fn an_hour_of_rfc3339_times_is_one_template() {
        let masker = Masker::default();
        let mut seen = std::collections::BTreeSet::new();
        for sec in (0..3600).step_by(7) {
            let (mm, ss) = (sec / 60, sec % 60);
            for line in [
                format!("heartbeat at 2024-05-01T10:{mm:02}:{ss:02}Z from worker"),
                format!("heartbeat at 2024-05-01T10:{mm:02}:{ss:02}.{:03}Z from worker", sec % 1000),
                format!("heartbeat at 2024-05-01T10:{mm:02}:{ss:02}.{:03}+02:00 from worker", sec % 1000),
            ] {
                seen.insert(masker.mask(&line));
            }
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["heartbeat at <HH>:<MM>:<SS> from worker"]);
    }

    #[test]
    fn quantities_and_key_values() {
        assert_eq!(m("took 250ms, after 1h30m, 1.5s"), "took <DURATION>, after <DURATION>, <DURATION>");
        assert_eq!(m("phys_ram=64172MB disk 15GB"), "phys_ram=<SIZE> disk <SIZE>");
        assert_eq!(m("3rd 64bit"), "3rd 64bit");
        assert_eq!(m("(estimated size 5.2 KB, free 14 MB)"), "(estimated size <SIZE>, free <SIZE>)");
        assert_eq!(m("read 1396 bytes, 12 B"), "read <NUM> bytes, <SIZE>");
        assert_eq!(m("session=7f3a-b2 mode=strict tty=NODEVssh"), "session=<VALUE> mode=strict tty=NODEVssh");
        assert_eq!(m("type=40002,7163.0,old=6983.0"), "type=<NUM>,<NUM>.<NUM>,old=<NUM>.<NUM>");
    }

    #[test]
    fn whitespace_is_normalised_and_non_ascii_survives() {
        assert_eq!(m("  a\t b  "), "a b");
        assert_eq!(m("größe 12 µ3 ü7"), "größe <NUM> µ3 ü7");
        assert_eq!(m(""), "");
    }

    #[test]
    fn rules_can_be_disabled() {
        let cfg = MaskingConfig { disable: vec!["ip".into(), "num".into()], ..Default::default() };
        let masker = Masker::new(&cfg).unwrap();
        assert_eq!(masker.mask("from 10.0.0.1 took 12"), "from 10.0.0.1 took 12");
        assert_ne!(masker.version(), MASKING_VERSION);
        let unknown = MaskingConfig { disable: vec!["ipv9".into()], ..Default::default() };
        assert_eq!(Masker::new(&unknown).unwrap_err(), MaskingError::UnknownRule("ipv9".into()));
        let off = MaskingConfig { enabled: false, ..Default::default() };
        assert_eq!(Masker::new(&off).unwrap().mask("a  1"), "a 1");
    }

    #[test]
    fn custom_rules_run_first() {
        let cfg = MaskingConfig {
            custom: vec![CustomRule { name: "ticket".into(), pattern: "TCK-#".into(), placeholder: "<TICKET>".into() }],
            ..Default::default()
        };
        let masker = Masker::new(&cfg).unwrap();
        assert_eq!(masker.mask("closed (TCK-1234), job 5"), "closed (<TICKET>), job <NUM>");
        let bad = |ph: &str, pat: &str| {
            let rule = CustomRule { name: "x".into(), pattern: pat.into(), placeholder: ph.into() };
            Masker::new(&MaskingConfig { custom: vec![rule], ..Default::default() }).is_err()
        };
        assert!(bad("<*>", "a*"));
        assert!(bad("TICKET", "a*"));
        assert!(bad("<T>", "a b"));
        assert!(bad("<T>", ""));
    }

    #[test]
    fn version_is_stable_and_order_insensitive() {
        assert_eq!(Masker::default().version(), "tayga-mask-2");
        let a = MaskingConfig { disable: vec!["ip".into(), "num".into()], ..Default::default() };
        let b = MaskingConfig { disable: vec!["num".into(), "ip".into()], ..Default::default() };
        assert_eq!(Masker::new(&a).unwrap().version(), Masker::new(&b).unwrap().version());
    }

    #[test]
    fn glob_semantics() {
        let g = |p: &str, s: &str| {
            let rule = CustomRule { name: "g".into(), pattern: p.into(), placeholder: "<G>".into() };
            Glob::compile(&rule).unwrap().matches(s.as_bytes())
        };
        assert!(g("req-%", "req-ab12"));
        assert!(!g("req-%", "req-"));
        assert!(g("*.log", "a.b.log"));
        assert!(g("u?#", "ux12"));
        assert!(!g("u?#", "ux"));
        assert!(g("#-#", "12-3") && !g("#-#", "12-") && !g("#-#", "a-3"));
        assert!(g("*", "") && !g("?", ""));
        // Exponential for a matcher that tries each star's lengths in turn: it would not
        // finish within a test run.
        let stars = "*".repeat(40);
        assert!(!g(&format!("{stars}x{stars}y"), &"ab".repeat(200)));
        assert!(g(&format!("{stars}x{stars}"), &"ab".repeat(100)[..].replace("ba", "bx")));
    }

    /// The definition: each part consumes what it says, a star any run, `#`/`%` one or more
    /// (hex) digits. Exponential, so only for small inputs.
    fn glob_reference(p: &[GlobPart], s: &[u8]) -> bool {
        let Some((first, rest)) = p.split_first() else { return s.is_empty() };
        match first {
            GlobPart::Lit(c) => s.first() == Some(c) && glob_reference(rest, &s[1..]),
            GlobPart::One => !s.is_empty() && glob_reference(rest, &s[1..]),
            GlobPart::Star => (0..=s.len()).any(|k| glob_reference(rest, &s[k..])),
            GlobPart::Digits | GlobPart::HexDigits => {
                let ok = |c: &u8| if *first == GlobPart::Digits { c.is_ascii_digit() } else { c.is_ascii_hexdigit() };
                let run = s.iter().take_while(|c| ok(c)).count();
                (1..=run).any(|k| glob_reference(rest, &s[k..]))
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn glob_matching_agrees_with_its_definition(pattern in "[*?#%ab1]{0,8}", word in "[ab1f2]{0,10}") {
            let rule = CustomRule { name: "g".into(), pattern: pattern.clone(), placeholder: "<G>".into() };
            let Ok(glob) = Glob::compile(&rule) else { return Ok(()) };
            proptest::prop_assert_eq!(glob.matches(word.as_bytes()), glob_reference(&glob.parts, word.as_bytes()));
        }
    }
}
