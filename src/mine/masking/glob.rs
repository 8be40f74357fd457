//! Custom masking rules: a small glob language compiled once, matched against a word.

use super::MaskingError;
use crate::mine::CustomRule;

/// A compiled custom-rule glob.
#[derive(Clone, Debug)]
pub(super) struct Glob {
    parts: Vec<GlobPart>,
    pub(super) placeholder: String,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum GlobPart {
    Star,
    One,
    Digits,
    HexDigits,
    Lit(u8),
}

impl Glob {
    pub(super) fn compile(rule: &CustomRule) -> Result<Glob, MaskingError> {
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

    pub(super) fn matches(&self, s: &[u8]) -> bool {
        glob_match(&self.parts, s)
    }
}

/// Whether the glob matches the whole of `s`. The set of positions of `s` reachable
/// after each part is carried forward, so the time is parts × bytes whatever the pattern:
/// trying each star's every length in turn is exponential in the stars (`*****…x`, one
/// operator's typo, stalled the miner for seconds on one word).
pub(super) fn glob_match(p: &[GlobPart], s: &[u8]) -> bool {
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
