//! The masking rules (`tayga::mine::Masker`) on any line, with the default rules and with
//! a custom rule whose glob comes from the input (as `[[logminer.masking.custom]]` would).
//! The output must be words separated by single spaces, and masking is a function: the
//! same line masks the same way twice.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tayga::mine::{CustomRule, Masker, MaskingConfig};

fn check(masker: &Masker, line: &str) {
    let masked = masker.mask(line);
    assert!(!masked.contains("  "), "double space in {masked:?}");
    assert!(!masked.starts_with(' ') && !masked.ends_with(' '), "edge space in {masked:?}");
    assert_eq!(masked, masker.mask(line), "masking is not deterministic");
    let mut buffer = String::from("left over");
    masker.mask_into(line, &mut buffer);
    assert_eq!(buffer, masked);
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let masker = Masker::default();
    check(&masker, &text);
    // "pattern\nline": the first line is a custom rule's glob, the rest is masked with it.
    if let Some((pattern, line)) = text.split_once('\n') {
        let config = MaskingConfig {
            enabled: true,
            disable: vec!["num".to_string()],
            custom: vec![CustomRule {
                name: "fuzz".to_string(),
                pattern: pattern.to_string(),
                placeholder: "<FUZZ>".to_string(),
            }],
        };
        if let Ok(custom) = Masker::new(&config) {
            check(&custom, line);
        }
    }
});
