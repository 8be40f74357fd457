//! The scanners the built-in rules are made of: one pass over a word's bytes each, no
//! backtracking, no allocation. Each says where its variable ends, if it starts here.

use super::{Match, Rule};

/// Character classes, looked up once per byte while splitting a line into words; a
/// word's union of classes gates the rules that could match in it.
pub(super) const DIGIT: u16 = 1;
pub(super) const SLASH: u16 = 2;
pub(super) const AT: u16 = 4;
pub(super) const BACKSLASH: u16 = 8;
pub(super) const DOT: u16 = 16;
pub(super) const COLON: u16 = 32;
/// `-` and `_`.
pub(super) const DASH: u16 = 64;
pub(super) const SPACE: u16 = 128;
/// `<`: the word may spell a learned wildcard (`<*>`, `<...>`).
pub(super) const LT: u16 = 256;
/// A word with none of these is copied as it is: no rule can match in it.
pub(super) const MASKABLE: u16 = DIGIT | SLASH | AT | BACKSLASH | DOT | COLON;

pub(super) const CLASS: [u16; 256] = {
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
pub(super) const ALNUM: [u8; 256] = {
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
pub(super) fn next_word(b: &[u8], mut i: usize) -> Option<(usize, usize, u16)> {
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
pub(super) fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

#[inline]
pub(super) fn skip_word(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_word(b[i]) {
        i += 1;
    }
    i
}

/// True when a variable may end before position `j`.
#[inline]
pub(super) fn ends_at(b: &[u8], j: usize) -> bool {
    j >= b.len() || !is_word(b[j])
}

pub(super) fn run(b: &[u8], i: usize, pred: impl Fn(u8) -> bool) -> usize {
    let mut j = i;
    while j < b.len() && pred(b[j]) {
        j += 1;
    }
    j
}

/// Digits, ending at a word boundary; a following `.5` is masked as a separate run.
pub(super) fn number(b: &[u8], i: usize) -> Option<usize> {
    let j = run(b, i, |c| c.is_ascii_digit());
    (j > i && ends_at(b, j)).then_some(j)
}

/// A number with a unit: `250ms`, `1.5s`, `1h30m` (durations) or `64MB`, `2.5GiB` (sizes).
pub(super) fn quantity(b: &[u8], i: usize) -> Option<(usize, Rule)> {
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
pub(super) fn digits_at(b: &[u8], j: usize, n: usize) -> bool {
    j + n <= b.len() && b[j..j + n].iter().all(u8::is_ascii_digit)
}

/// A number from `lo` to `hi` written with exactly two digits at `j`.
pub(super) fn two_digits_in(b: &[u8], j: usize, lo: u8, hi: u8) -> bool {
    digits_at(b, j, 2) && (lo..=hi).contains(&((b[j] - b'0') * 10 + (b[j + 1] - b'0')))
}

/// A clock time `H:MM:SS` or `HH:MM:SS`, with an optional fraction (`.123`, `,123`) and
/// zone (`Z`, `+02:00`, `-0700`); its end. Minutes and seconds alone (`00:05`) are as
/// often a duration or a ratio as a time, so the seconds are required.
pub(super) fn clock(b: &[u8], i: usize) -> Option<usize> {
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
pub(super) fn zone(b: &[u8], j: usize) -> usize {
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
pub(super) fn iso_date(b: &[u8], i: usize) -> Option<usize> {
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
pub(super) fn timestamp(b: &[u8], i: usize) -> Option<(usize, bool)> {
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
pub(super) fn starts_time_phrase(word: &str, next: Option<&str>) -> bool {
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

pub(super) const ZONES: &[&str] = &[
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
pub(super) fn time_phrase(b: &[u8], start: usize) -> Option<(usize, usize)> {
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
pub(super) fn push_time(phrase: &str, out: &mut String) {
    let lead = phrase.len() - phrase.trim_start_matches(['[', '(']).len();
    out.push_str(&phrase[..lead]);
    out.push_str(Rule::Time.placeholder());
}

pub(super) fn ipv4(b: &[u8], i: usize) -> Option<usize> {
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
pub(super) fn ipv6(b: &[u8], i: usize) -> Option<usize> {
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

pub(super) fn uuid(b: &[u8], i: usize) -> Option<usize> {
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

pub(super) fn mac(b: &[u8], i: usize) -> Option<usize> {
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
pub(super) fn hex(b: &[u8], i: usize) -> Option<usize> {
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

pub(super) const TLDS: &[&[u8]] = &[
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

pub(super) const SOURCE_EXTENSIONS: &[&[u8]] = &[
    b"java", b"py", b"go", b"rs", b"c", b"cc", b"cpp", b"cxx", b"h", b"hpp", b"js", b"ts", b"rb", b"scala", b"kt",
    b"cs", b"php", b"swift", b"m", b"pl", b"ex", b"exs", b"erl",
];

/// A host name, recognised by context: followed by a port (`db-1:5432`), by `/IP` (Java's
/// `host/10.0.0.1:80`), or ending in a well-known top-level domain (`cp-1.utah.example.us`).
/// Dotted words are otherwise left alone: `org.apache.Foo`, `android.intent.action.X` and
/// `Client.java:1475` are code, not hosts.
pub(super) fn host(b: &[u8], i: usize) -> Option<usize> {
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

pub(super) fn email(b: &[u8], i: usize) -> Option<usize> {
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
pub(super) fn url(b: &[u8], i: usize) -> Option<Match> {
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
pub(super) fn path_end(b: &[u8], i: usize) -> usize {
    let mut j = run(b, i, |c| !matches!(c, b'"' | b'\'' | b'<' | b'>' | b')' | b']' | b'}' | b',' | b';' | b'|'));
    while j > i && matches!(b[j - 1], b'.' | b':') {
        j -= 1;
    }
    j
}

/// An absolute path of at least two components (`/var/log/x`); a single component
/// (`/default-rack`) is as often a name as a path, and `/10.0.0.1` is an address.
pub(super) fn path_abs(b: &[u8], i: usize) -> Option<usize> {
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
pub(super) fn path_end_colon(b: &[u8], i: usize) -> usize {
    let end = path_end(b, i);
    b[i..end].iter().position(|&c| c == b':').map_or(end, |p| i + p)
}

/// `./x`, `../x/y`, `~/x`.
pub(super) fn path_rel(b: &[u8], i: usize) -> Option<usize> {
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
pub(super) fn path_windows(b: &[u8], i: usize) -> Option<usize> {
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
pub(super) fn prefixed_id(b: &[u8], i: usize) -> Option<Match> {
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

pub(super) fn is_date_name(w: &str) -> bool {
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
