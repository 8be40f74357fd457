//! Tokens and template items: what a masked line is split into, what a template is made
//! of, and the judgements on single tokens (a word or a value, a setting, a unit, the same
//! variable spelt two ways) that matching and generalisation are built on.

pub(super) const WILD: &str = "<*>";

/// One template item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// A constant token; `word` says it has letters outside placeholders (`closed`,
    /// `blk_<ID>`), as opposed to a value (`<NUM>`, `<IP>:<NUM>`, `-`), which must still
    /// match but is no evidence that two lines say the same thing.
    Lit(Box<str>, bool),
    /// `<*>`: any one token.
    Wild,
    /// `pre<*>suf`: a variable that keeps the punctuation around it, e.g. `(<*>)` or
    /// `user=<*>`, so the template still says what the variable is.
    Part(Box<str>, Box<str>),
    /// `<...>`: any number of tokens, zero included: a variable whose width varies
    /// (`<1 sec` / `00:05`) or that is sometimes absent (`(1.2 KB)`).
    Gap,
}

pub(super) const GAP: &str = "<...>";

impl Tok {
    pub(super) fn lit(s: &str) -> Tok {
        Tok::Lit(s.into(), is_word(s))
    }

    pub(super) fn parse(s: &str) -> Tok {
        if s == WILD {
            return Tok::Wild;
        }
        if s == GAP {
            return Tok::Gap;
        }
        match (s.find(WILD), s.rfind(WILD)) {
            (Some(first), Some(last)) => Tok::Part(s[..first].into(), s[last + WILD.len()..].into()),
            _ => Tok::lit(s),
        }
    }

    pub(super) fn write(&self, out: &mut String) {
        match self {
            Tok::Lit(s, _) => out.push_str(s),
            Tok::Wild => out.push_str(WILD),
            Tok::Part(p, s) => {
                out.push_str(p);
                out.push_str(WILD);
                out.push_str(s);
            }
            Tok::Gap => out.push_str(GAP),
        }
    }

    /// How the item routes through the tree: `None` is the `<*>` branch. Values route
    /// there too: a token that is only placeholders says nothing about which event this
    /// is, and a list `<IP>,<IP>` must meet a single `<IP>`.
    pub(super) fn route(&self, numeric: bool) -> Option<&str> {
        match self {
            Tok::Lit(s, true) => route_str(s, numeric),
            _ => None,
        }
    }

    pub(super) fn fits(&self, l: &str) -> bool {
        match self {
            Tok::Lit(s, _) => **s == *l,
            Tok::Wild => true,
            Tok::Part(p, s) => part_matches(p, s, l),
            Tok::Gap => false,
        }
    }

    /// Could this item be (part of) a variable? Used to decide whether a span may change
    /// width.
    pub(super) fn variable_like(&self) -> bool {
        !matches!(self, Tok::Lit(_, true))
    }
}

/// Has the token letters outside its placeholders?
pub(super) fn is_word(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'<' {
            let close = b[i + 1..].iter().position(|&c| !(c.is_ascii_alphabetic() || c == b'*' || c == b'.'));
            if let Some(k) = close {
                if k > 0 && b[i + 1 + k] == b'>' {
                    i += k + 2;
                    continue;
                }
            }
        }
        if b[i].is_ascii_alphabetic() || b[i] >= 0x80 {
            return true;
        }
        i += 1;
    }
    false
}

/// Do two differing tokens say the same thing about different values? Then they are no
/// evidence against a match. That is so when they differ only in their placeholders
/// (`rhost=<IP>`, `rhost=<HOST>`) or in the digits glued to their letters (`dn228` and
/// `dn31`, `R02-M1` and `R17-M0`: the masker leaves such names alone because digits inside
/// a word are as often part of it, `tty2`, `x86_64`). Quoted words are not taken for
/// values here (`service 'sparkDriver'` and `service 'BlockManager'` may be two events);
/// the sibling merge finds the quoted positions that do vary.
pub(super) fn same_shape(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    let mut swapped = false;
    loop {
        match (a.get(i), b.get(j)) {
            (None, None) => return swapped,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let ei = i + a[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                let ej = j + b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
                swapped |= a[i..ei] != b[j..ej];
                i = ei;
                j = ej;
            }
            (Some(b'<'), Some(b'<')) => {
                let (Some(ei), Some(ej)) = (placeholder_end(a, i), placeholder_end(b, j)) else {
                    return false;
                };
                swapped |= a[i..ei] != b[j..ej];
                i = ei;
                j = ej;
            }
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            _ => return false,
        }
    }
}

/// Are two differing tokens, each with a placeholder inside, the same variable? The
/// masker found a value in both at the same place; when what comes before it is the
/// same, the rest is the value's own spelling, not another event: a version
/// `<NUM>:<NUM>.<NUM>-<NUM>+deb12u1` against `<NUM>.<NUM>-<NUM>`, `(<NUM>.<NUM>+dfsg)`
/// against `(<NUM>:<NUM>)`. A different prefix (`blk_<ID>`, `rdd_<ID>`) says what the
/// value is. With no prefix, two words whose letters differ are taken for one variable
/// too (`<NUM>/tcp` and `<NUM>/udp`): versions, the case that asked for this, are most
/// often words on both sides (`+deb12u1`, `.dfsg`), and a port's protocol is a value to
/// an annotator as well.
pub(super) fn same_variable(a: &str, b: &str) -> bool {
    let (Some(i), Some(j)) = (a.find('<'), b.find('<')) else { return false };
    i == j
        && a[..i] == b[..j]
        && placeholder_end(a.as_bytes(), i).is_some()
        && placeholder_end(b.as_bytes(), j).is_some()
}

/// The end of a `<NAME>` placeholder starting at `i`.
pub(super) fn placeholder_end(b: &[u8], i: usize) -> Option<usize> {
    let k = b[i + 1..].iter().position(|&c| !(c.is_ascii_alphabetic() || c == b'*' || c == b'.'))?;
    (k > 0 && b[i + 1 + k] == b'>').then_some(i + k + 2)
}

/// A `key=word` token (`user=root`, `mode=strict`, `status=FAILED`): a setting, which
/// the masker leaves alone because it usually says which event this is. A line that
/// differs from a template in a setting never joins it, however similar the rest.
pub(super) fn is_setting(s: &str) -> bool {
    let Some(eq) = s.find('=') else { return false };
    let key = &s[..eq];
    let value = s[eq + 1..].trim_matches(|c| matches!(c, '"' | '\'' | ',' | ';'));
    key.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && key.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        && value.bytes().any(|c| c.is_ascii_alphabetic())
        && !value.contains('<')
        && !value.contains('=')
}

/// Units written after a number (`1.36 KB`, `<1 sec`): part of the quantity when a span
/// changes width.
pub(super) fn is_unit(s: &str) -> bool {
    let t = s.trim_matches(|c: char| c.is_ascii_punctuation());
    matches!(
        t,
        "B" | "KB"
            | "kB"
            | "MB"
            | "GB"
            | "TB"
            | "KiB"
            | "MiB"
            | "GiB"
            | "TiB"
            | "bytes"
            | "ns"
            | "us"
            | "ms"
            | "s"
            | "sec"
            | "secs"
            | "second"
            | "seconds"
            | "min"
            | "mins"
            | "minute"
            | "minutes"
            | "h"
            | "hr"
            | "hrs"
            | "hour"
            | "hours"
            | "d"
            | "day"
            | "days"
    )
}

/// Values, tokens holding a placeholder (`rdd_<ID>`) and, like Drain's numeric rule,
/// tokens with digits take the `<*>` branch: they are or contain variables, and routing on
/// them would put lines of one event in different leaves.
pub(super) fn route_str(s: &str, numeric: bool) -> Option<&str> {
    // One pass: a letter makes it a word; `<` (a placeholder) or, with the numeric rule,
    // a digit sends it down the `<*>` branch.
    let mut letter = false;
    for &c in s.as_bytes() {
        if c == b'<' || numeric && c.is_ascii_digit() {
            return None;
        }
        letter |= c.is_ascii_alphabetic() || c >= 0x80;
    }
    letter.then_some(s)
}

/// A masked line split into tokens, as spans into one buffer so that the hot loop
/// allocates nothing per token.
#[derive(Clone, Copy)]
pub(crate) struct Line<'a> {
    pub text: &'a str,
    pub spans: &'a [(u32, u32)],
}

impl<'a> Line<'a> {
    #[inline]
    pub(super) fn get(&self, i: usize) -> &'a str {
        let (s, e) = self.spans[i];
        &self.text[s as usize..e as usize]
    }
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.spans.len()
    }
}

pub(crate) fn render(tokens: &[Tok]) -> String {
    let mut out = String::new();
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        t.write(&mut out);
    }
    out
}

#[inline]
pub(super) fn part_matches(p: &str, s: &str, l: &str) -> bool {
    l.len() >= p.len() + s.len() && l.starts_with(p) && l.ends_with(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert!(same_shape("rhost=<IP>", "rhost=<HOST>"));
        assert!(!same_shape("rhost=<IP>", "rhost=<IP>"));
        assert!(!same_shape("rhost=<IP>", "lhost=<HOST>"));
        assert!(!same_shape("a<b", "a<c"));
        assert!(same_variable("(<NUM>.<NUM>)", "(<NUM>:<NUM>-<NUM>+deb12u1)"));
        assert!(same_variable("<NUM>.<NUM>+dfsg", "<NUM>"));
        assert!(!same_variable("blk_<ID>", "rdd_<ID>"), "the prefix says what the value is");
        assert!(!same_variable("(<NUM>)", "(x<NUM>)"));
        assert!(!same_variable("a<b", "a<c"), "not placeholders");
        assert!(!same_variable("<NUM>", "word"));
        assert!(is_word("blk_<ID>") && !is_word("<IP>:<NUM>") && !is_word("(<*>)") && !is_word("<...>"));
        assert!(is_setting("user=root") && is_setting("tty=NODEVssh,") && is_setting("mode=\"strict\""));
        assert!(!is_setting("uid=<NUM>") && !is_setting("logname=") && !is_setting("=x") && !is_setting("a=1"));
    }

    #[test]
    fn token_parse_round_trips() {
        for t in ["<*>", "(<*>)", "user=<*>", "plain", "<NUM>", "", "<...>"] {
            let mut s = String::new();
            Tok::parse(t).write(&mut s);
            assert_eq!(s, t);
        }
    }
}
