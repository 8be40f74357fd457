use proptest::prelude::*;

use super::*;

fn logs(input: &str) -> Query {
    parse(input, Scope::Logs).unwrap_or_else(|e| panic!("{input:?}: {e}"))
}

fn error(input: &str, scope: Scope) -> ParseError {
    parse(input, scope).expect_err(input)
}

#[test]
fn every_kind_of_term_is_read() {
    let q = logs(
        r#"timeout "connection reset" http.status_code=503 k="a b" service:checkout service=cart severity>=warn template:ab trace:0123456789ABCDEF0123456789abcdef"#,
    );
    assert_eq!(q.text, ["timeout", "connection reset"]);
    assert_eq!(q.attributes, [("http.status_code".to_string(), "503".to_string()), ("k".into(), "a b".into())]);
    assert_eq!(q.services, ["checkout", "cart"]);
    assert_eq!(q.severity, Some(Range { min: 13, max: 24 }));
    assert_eq!(q.templates, [0xab]);
    assert_eq!(q.traces, ["0123456789abcdef0123456789abcdef"]);
    let t = parse("service:api operation:\"GET /x\" duration>=1.5s duration<2m status:error user.id=7", Scope::Traces)
        .unwrap();
    assert_eq!(t.operations, ["GET /x"]);
    assert_eq!(t.duration, Some(Range { min: 1_500_000_000, max: 119_999_999_999 }));
    assert_eq!(t.statuses, [2]);
    assert_eq!(t.attributes, [("user.id".to_string(), "7".to_string())]);
}

#[test]
fn severities_are_bands_or_numbers_and_several_conditions_narrow() {
    let severity = |q: &str| logs(q).severity.map(|r| (r.min, r.max));
    assert_eq!(severity("severity:error"), Some((17, 20)));
    assert_eq!(severity("severity=WARNING"), Some((13, 16)));
    assert_eq!(severity("severity>info"), Some((13, 24)));
    assert_eq!(severity("severity<info"), Some((1, 8)));
    assert_eq!(severity("severity<=17"), Some((1, 17)));
    assert_eq!(severity("severity>=debug severity<error"), Some((5, 16)));
    let e = error("severity>=error severity<info", Scope::Logs);
    assert_eq!((e.position, e.length), (16, 13), "{e}");
    assert!(error("severity>=loud", Scope::Logs).message.contains("trace, debug, info, warn, error, fatal"));
    assert!(error("severity:25", Scope::Logs).message.contains("1 to 24"));
}

#[test]
fn words_that_are_not_terms_stay_words() {
    let q = logs("http://host/x a->b x>y GET:/path :x =y 1=2");
    assert_eq!(q.text, ["http://host/x", "a->b", "x>y", "GET:/path", ":x", "=y", "1=2"]);
    assert!(q.attributes.is_empty());
    assert_eq!(logs(r#""service:x" "a=b""#).text, ["service:x", "a=b"]);
    assert_eq!(logs(r#""say \"hi\" \\ now""#).text, [r#"say "hi" \ now"#]);
    assert!(logs("   ").is_empty());
}

#[test]
fn errors_say_what_and_where() {
    let cases: &[(&str, Scope, usize, &str)] = &[
        (r#"ok "never closed"#, Scope::Logs, 3, "never closed"),
        (r#"ab"c"#, Scope::Logs, 2, "quote inside a word"),
        (r#""a"b"#, Scope::Logs, 3, "space must follow"),
        (r#""a \n""#, Scope::Logs, 3, "backslash"),
        ("service:", Scope::Logs, 0, "needs a value"),
        ("k=", Scope::Logs, 0, "needs a value"),
        ("template:xyz", Scope::Logs, 0, "1 to 16 hex digits"),
        ("template:12345678901234567", Scope::Logs, 0, "1 to 16 hex digits"),
        ("a trace:abc", Scope::Logs, 2, "32 hex digits"),
        ("duration>=1s", Scope::Logs, 0, "traces only"),
        ("status:error", Scope::Logs, 0, "traces only"),
        ("operation:x", Scope::Logs, 0, "traces only"),
        ("x severity>=error", Scope::Traces, 0, "free text"),
        ("severity>=error", Scope::Traces, 0, "logs only"),
        ("template:1", Scope::Traces, 0, "logs only"),
        ("duration>=fast", Scope::Traces, 0, "not a duration"),
        ("duration=1s", Scope::Traces, 0, "compares with"),
        ("status:broken", Scope::Traces, 0, "unset, ok or error"),
        (r#"a """#, Scope::Logs, 2, "empty phrase"),
    ];
    for (input, scope, position, says) in cases {
        let e = error(input, *scope);
        assert_eq!(e.position, *position, "{input:?}: {e}");
        assert!(e.message.contains(says), "{input:?}: {e}");
        assert!(e.to_string().starts_with(&format!("at character {}: ", position + 1)), "{e}");
    }
    let many = vec!["w"; MAX_TERMS + 1].join(" ");
    assert_eq!(error(&many, Scope::Logs).position, 2 * MAX_TERMS);
}

#[test]
fn durations_take_units_and_fractions() {
    assert_eq!(duration_ns("250ms"), Some(250_000_000));
    assert_eq!(duration_ns("1.5s"), Some(1_500_000_000));
    assert_eq!(duration_ns("2m"), Some(120_000_000_000));
    assert_eq!(duration_ns("7us"), Some(7_000));
    assert_eq!(duration_ns("1h"), Some(3_600_000_000_000));
    for bad in ["", "ms", "1", "1.s", ".5s", "1..2s", "1d", "-1s", "1e3s"] {
        assert_eq!(duration_ns(bad), None, "{bad}");
    }
}

/// Words and values, including every character the syntax gives a meaning to.
fn value() -> impl Strategy<Value = String> {
    prop::string::string_regex(r#"[a-zA-Z0-9 "\\:=<>./_-]{1,12}"#).unwrap()
}

fn key() -> impl Strategy<Value = String> {
    prop::string::string_regex("[a-z_][a-z0-9_./-]{0,10}")
        .unwrap()
        .prop_filter("a field name", |k| !COLON_FIELDS.contains(&k.as_str()) && k != "duration")
}

fn range<T: Ord + Copy + std::fmt::Debug + 'static>(
    s: impl Strategy<Value = (T, T)>,
) -> impl Strategy<Value = Range<T>> {
    s.prop_map(|(a, b)| Range { min: a.min(b), max: a.max(b) })
}

fn logs_query() -> impl Strategy<Value = Query> {
    (
        prop::collection::vec(value(), 0..4),
        prop::collection::vec((key(), prop::string::string_regex(r#"[a-z "\\=:]{0,6}"#).unwrap()), 0..3),
        prop::collection::vec(value(), 0..3),
        prop::option::of(range((1u8..=24, 1u8..=24))),
        prop::collection::vec(any::<u64>(), 0..3),
        prop::collection::vec(prop::string::string_regex("[0-9a-f]{32}").unwrap(), 0..2),
    )
        .prop_map(|(text, attributes, services, severity, templates, traces)| Query {
            text,
            attributes,
            services,
            severity,
            templates,
            traces,
            ..Query::default()
        })
}

fn traces_query() -> impl Strategy<Value = Query> {
    (
        prop::collection::vec(value(), 0..3),
        prop::collection::vec(value(), 0..3),
        prop::option::of(range((any::<u64>(), any::<u64>()))),
        prop::collection::vec(0u8..3, 0..3),
    )
        .prop_map(|(services, operations, duration, statuses)| Query {
            services,
            operations,
            duration,
            statuses,
            ..Query::default()
        })
}

proptest! {
    #[test]
    fn a_logs_query_reads_back_from_its_canonical_form(q in logs_query()) {
        let text = q.to_string();
        prop_assert_eq!(parse(&text, Scope::Logs), Ok(q), "{}", text);
    }

    #[test]
    fn a_traces_query_reads_back_from_its_canonical_form(q in traces_query()) {
        let text = q.to_string();
        prop_assert_eq!(parse(&text, Scope::Traces), Ok(q), "{}", text);
    }

    #[test]
    fn any_input_is_read_or_refused_at_a_place_inside_it(input in r#"[ a-z"\\:=<>!0-9.]{0,40}|\PC{0,40}"#) {
        for scope in [Scope::Logs, Scope::Traces] {
            if let Err(e) = parse(&input, scope) {
                prop_assert!(e.length >= 1);
                prop_assert!(e.position <= input.chars().count(), "{:?}: {}", input, e);
            }
        }
    }

    #[test]
    fn free_words_without_syntax_are_the_text_searched(words in prop::collection::vec("[a-z0-9]{1,8}", 1..6)) {
        let q = parse(&words.join("  "), Scope::Logs).unwrap();
        prop_assert_eq!(q.text, words);
    }
}
