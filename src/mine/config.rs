//! Mining configuration: the `[logminer.drain]` and `[logminer.masking]` sections of
//! tayga.toml. Every field has a default, so an empty section (or none) is the tuned
//! default that serves every kind of log; fields are plain numbers, bools and strings so
//! they read naturally in TOML.

use serde::{Deserialize, Serialize};

/// Both halves of the miner's configuration.
#[derive(Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MiningConfig {
    pub drain: DrainConfig,
    pub masking: MaskingConfig,
}

/// The Drain parameters, named as in Drain3 where Drain3 has the same knob.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DrainConfig {
    /// Depth of the parse tree, counting the root and the leaf as in Drain3: depth 4 routes
    /// a line by its token count and then its first two tokens. Values below 3 are raised
    /// to 3 (routing by token count and the first token).
    pub depth: usize,
    /// Minimum similarity for a line to join a template: the share of the template's
    /// constant tokens that the line repeats exactly (wildcards are left out of the
    /// ratio, unlike Drain3, so a template does not become harder to join as it learns).
    pub sim_th: f64,
    /// Most literal children one tree node keeps; a token that finds the node full is
    /// routed to the node's `<*>` child and becomes a wildcard in its template.
    pub max_children: usize,
    /// Most templates kept per service; the least recently used one is evicted to make
    /// room. This is what bounds the miner's memory.
    pub max_clusters: usize,
    /// Most services with a tree; a line of one more service forgets the tree of the
    /// service mined least recently (its templates stay stored; its next line starts a tree
    /// afresh, whose templates are born again with the same ids). With `max_clusters`, this
    /// bounds the miner's memory whatever the number of services sending logs.
    pub max_services: usize,
    /// Route tokens that contain a digit through the `<*>` branch of the tree (Drain's
    /// numeric-token rule), so an unmasked id in the first tokens cannot split a template.
    pub parametrize_numeric_tokens: bool,
    /// Sibling merge: when a line would be born as a new template, and this many
    /// templates (the line's included) agree on every token but one, the differing
    /// position is a variable the threshold could not see (a user or host name, a
    /// `key=value`), and they become one template. A second differing position needs one
    /// template more. 0 turns the merge off. The logminer stores what a merge retires
    /// (docs/mining.md, *Merging and identity*).
    pub merge_siblings: usize,
    /// Most positions in which merged siblings may differ (1 or 2).
    pub merge_positions: usize,
    /// Siblings merge only when they are at least this share of the lines they hold
    /// (the line's included): a variable brings a new value with most lines, while a few
    /// events that differ in one word each repeat.
    pub merge_ratio: f64,
    /// Siblings this many (the line's included) merge whatever their frequencies: events
    /// that differ in one word come in handfuls, a variable's values keep coming. 0 turns
    /// this off.
    pub merge_values: usize,
}

impl Default for DrainConfig {
    fn default() -> Self {
        DrainConfig {
            depth: 4,
            sim_th: 0.85,
            max_children: 100,
            max_clusters: 5000,
            max_services: 10_000,
            parametrize_numeric_tokens: true,
            merge_siblings: 5,
            merge_positions: 2,
            merge_ratio: 0.7,
            merge_values: 8,
        }
    }
}

/// Masking replaces variable parts of a line (IPs, numbers, ids, …) with placeholders
/// before Drain sees it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MaskingConfig {
    /// Turn masking off entirely (Drain then sees raw tokens, as Drain3 does by default).
    pub enabled: bool,
    /// Names of built-in rules to switch off, e.g. `["path", "kv"]`; see
    /// [`crate::mine::masking::BUILTIN_RULES`].
    pub disable: Vec<String>,
    /// Extra rules, tried on each word before the built-in rules.
    pub custom: Vec<CustomRule>,
}

impl Default for MaskingConfig {
    fn default() -> Self {
        MaskingConfig { enabled: true, disable: Vec::new(), custom: Vec::new() }
    }
}

/// A user rule: a glob matched against the core of a word (the word without surrounding
/// brackets, quotes and trailing punctuation). In `pattern`, `*` matches any run of
/// characters, `?` one character, `#` a run of one or more ASCII digits and `%` a run of
/// one or more hex digits; every other character matches itself.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct CustomRule {
    /// A short name, used in error messages.
    pub name: String,
    pub pattern: String,
    /// What replaces a matching core, e.g. `<TICKET>`; must look like `<NAME>` and must
    /// not be `<*>`, which is reserved for the wildcards Drain learns.
    pub placeholder: String,
}
