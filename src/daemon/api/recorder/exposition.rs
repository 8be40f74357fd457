//! The Prometheus / OpenMetrics text format, read into samples: `name{k="v",…} value
//! [timestamp]` lines; comments (`# TYPE`, `# HELP`, `# EOF`) and blank lines are skipped.
//! A malformed line is skipped too (one bad line must not lose a whole scrape), and counted.

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// The samples of an exposition text, and how many lines could not be read.
pub fn parse(text: &str) -> (Vec<Sample>, usize) {
    let mut samples = Vec::new();
    let mut bad = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Some(s) => samples.push(s),
            None => bad += 1,
        }
    }
    (samples, bad)
}

fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = &line[..name_end];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, remaining) = parse_labels(after)?;
        labels = parsed;
        rest = remaining;
    }
    let value = rest.split_whitespace().next()?;
    Some(Sample { name: name.to_string(), labels, value: parse_value(value)? })
}

/// Reads `k="v",…}`; returns the labels and what follows the closing brace.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Some((labels, rest));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        };
        labels.push((key, value));
        s = s[end + 1..].trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        }
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// Writes samples in the text format (the tests' fake services and the property test).
pub fn render(samples: &[Sample]) -> String {
    let mut out = String::new();
    for s in samples {
        out.push_str(&s.name);
        if !s.labels.is_empty() {
            let labels: Vec<String> = s
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")))
                .collect();
            out.push('{');
            out.push_str(&labels.join(","));
            out.push('}');
        }
        out.push_str(&format!(" {}\n", s.value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_what_prometheus_client_writes() {
        let text = "# HELP tayga_logminer_templates Templates held in memory.\n\
                    # TYPE tayga_logminer_templates gauge\n\
                    tayga_logminer_templates 42\n\
                    # TYPE tayga_writer_rows_written counter\n\
                    tayga_writer_rows_written_total{table=\"spans\"} 1200\n\
                    tayga_x_bucket{le=\"+Inf\",a=\"q\\\"uote\"} 3 1700000000\n\
                    broken line here\n\
                    # EOF\n";
        let (samples, bad) = parse(text);
        assert_eq!(bad, 1);
        assert_eq!(samples.len(), 3);
        assert_eq!(samples[0], Sample { name: "tayga_logminer_templates".into(), labels: vec![], value: 42.0 });
        assert_eq!(samples[1].labels, vec![("table".to_string(), "spans".to_string())]);
        assert_eq!(samples[2].labels[1], ("a".to_string(), "q\"uote".to_string()));
        assert_eq!(samples[2].value, 3.0);
    }

    proptest! {
        #[test]
        fn rendered_samples_parse_back(
            samples in proptest::collection::vec(
                ("[a-z_][a-z0-9_]{0,20}", proptest::collection::vec(("[a-z_]{1,8}", "[ -~\\n]{0,12}"), 0..4), -1e12f64..1e12),
                0..10,
            )
        ) {
            let samples: Vec<Sample> =
                samples.into_iter().map(|(name, labels, value)| Sample { name, labels, value }).collect();
            let (back, bad) = parse(&render(&samples));
            prop_assert_eq!(bad, 0);
            prop_assert_eq!(back, samples);
        }

        #[test]
        fn any_text_parses_without_panicking(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }
    }
}
