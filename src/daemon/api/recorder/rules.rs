//! How the pipeline endpoint combines the replicas of a service
//! (docs/design.md#replica-metrics): counter rates (and the histogram series quantiles are
//! computed from) are summed over replicas; the data lag, the template count and `up` take the largest
//! replica; every other gauge is summed. The rule of each metric name is in [`RULES`], one
//! small table, so a renaming of metrics changes only this table.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// A counter: per-second rate per replica, summed over replicas.
    Rate,
    /// The largest replica's value.
    Max,
    /// The replicas' values summed.
    Sum,
}

/// A pattern on a metric name: `*suffix` or an exact name.
pub type Pattern = &'static str;

/// The first matching pattern decides; no match means [`Rule::Sum`].
pub const RULES: &[(Pattern, Rule)] = &[
    // Counters (OpenMetrics writes them with `_total`) and the cumulative series of a
    // histogram, whose rates the quantiles are computed from.
    ("*_total", Rule::Rate),
    ("*_bucket", Rule::Rate),
    ("*_count", Rule::Rate),
    ("*_sum", Rule::Rate),
    // The recorder's own per-instance sample, and every daemon's own.
    ("up", Rule::Max),
    ("*_up", Rule::Max),
    ("*_data_lag_seconds", Rule::Max),
    ("tayga_logminer_templates", Rule::Max),
];

pub fn rule_for(metric: &str) -> Rule {
    RULES
        .iter()
        .find(|(pattern, _)| match pattern.strip_prefix('*') {
            Some(suffix) => metric.ends_with(suffix),
            None => metric == *pattern,
        })
        .map(|(_, rule)| *rule)
        .unwrap_or(Rule::Sum)
}

/// One recorded value: an instance's last sample in a time step.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub instance: String,
    pub step_ns: u64,
    pub value: f64,
}

/// The per-instance series of one (service, metric, labels) and their combination, as
/// `(step start ns, value)` pairs. For a counter both are rates per second: an instance's
/// first step has no rate (nothing to compare with), and a value below the previous one is
/// a restart, whose rate counts from zero.
#[derive(Debug, Clone, PartialEq)]
pub struct Combined {
    pub rule: Rule,
    pub instances: BTreeMap<String, Vec<(u64, f64)>>,
    pub total: Vec<(u64, f64)>,
}

pub fn combine(metric: &str, points: &[Point]) -> Combined {
    let rule = rule_for(metric);
    let mut raw: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    for p in points {
        raw.entry(p.instance.clone()).or_default().push((p.step_ns, p.value));
    }
    let instances: BTreeMap<String, Vec<(u64, f64)>> = raw
        .into_iter()
        .map(|(instance, mut series)| {
            series.sort_by_key(|(t, _)| *t);
            series.dedup_by_key(|(t, _)| *t);
            let series = if rule == Rule::Rate { rates(&series) } else { series };
            (instance, series)
        })
        .collect();
    let mut by_step: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for series in instances.values() {
        for (t, v) in series {
            by_step.entry(*t).or_default().push(*v);
        }
    }
    let total = by_step
        .into_iter()
        .map(|(t, values)| {
            let v = match rule {
                Rule::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                Rule::Rate | Rule::Sum => values.iter().sum(),
            };
            (t, v)
        })
        .collect();
    Combined { rule, instances, total }
}

/// The `q` quantile (0 to 1) of a histogram from its cumulative buckets as `(upper bound,
/// count or rate)`, by linear interpolation inside the bucket the rank falls in, as
/// Prometheus' `histogram_quantile` does. Fed the bucket rates summed over replicas, this is
/// the quantile of all replicas' observations together. `None` without observations.
pub fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let mut buckets = buckets.to_vec();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    if total.is_nan() || total <= 0.0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for (upper, count) in buckets {
        if count >= rank {
            if upper.is_infinite() {
                return Some(lower);
            }
            if count <= below {
                return Some(upper);
            }
            return Some(lower + (upper - lower) * (rank - below) / (count - below));
        }
        (lower, below) = (upper, count);
    }
    Some(lower)
}

/// Per-second rates between consecutive steps of one counter.
fn rates(series: &[(u64, f64)]) -> Vec<(u64, f64)> {
    series
        .windows(2)
        .map(|w| {
            let ((t0, v0), (t1, v1)) = (w[0], w[1]);
            let increase = if v1 >= v0 { v1 - v0 } else { v1 };
            (t1, increase / ((t1 - t0) as f64 / 1e9))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(instance: &str, step_ns: u64, value: f64) -> Point {
        Point { instance: instance.into(), step_ns, value }
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn every_seed_rule_has_its_metric() {
        assert_eq!(rule_for("tayga_logminer_templates"), Rule::Max);
        assert_eq!(rule_for("tayga_logminer_data_lag_seconds"), Rule::Max);
        assert_eq!(rule_for("up"), Rule::Max);
        assert_eq!(rule_for("tayga_logminer_up"), Rule::Max);
        assert_eq!(rule_for("tayga_logminer_logs_mined_total"), Rule::Rate);
        assert_eq!(rule_for("tayga_logminer_pass_duration_seconds_bucket"), Rule::Rate);
        assert_eq!(rule_for("tayga_logminer_owned_services"), Rule::Sum);
        assert_eq!(rule_for("tayga_logminer_lag"), Rule::Sum);
    }

    #[test]
    fn the_template_count_is_the_largest_replica_not_the_sum() {
        let c = combine("tayga_logminer_templates", &[p("a", 0, 5.0), p("b", 0, 9.0), p("a", S, 6.0)]);
        assert_eq!(c.total, vec![(0, 9.0), (S, 6.0)]);
    }

    #[test]
    fn counter_rates_sum_over_replicas_and_survive_a_restart() {
        let c = combine("x_total", &[p("a", 0, 10.0), p("a", 10 * S, 30.0), p("b", 0, 100.0), p("b", 10 * S, 5.0)]);
        assert_eq!(c.instances["a"], vec![(10 * S, 2.0)]);
        assert_eq!(c.instances["b"], vec![(10 * S, 0.5)], "b restarted: its 5 count from zero");
        assert_eq!(c.total, vec![(10 * S, 2.5)]);
    }

    #[test]
    fn a_replica_appearing_mid_window_adds_from_its_second_step() {
        let c = combine(
            "x_total",
            &[p("a", 0, 0.0), p("a", S, 1.0), p("a", 2 * S, 2.0), p("b", S, 50.0), p("b", 2 * S, 51.0)],
        );
        assert_eq!(c.total, vec![(S, 1.0), (2 * S, 2.0)]);
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket() {
        // 10 observations ≤ 0.1 s, 10 more ≤ 1 s, none above.
        let buckets = [(0.1, 10.0), (1.0, 20.0), (f64::INFINITY, 20.0)];
        assert_eq!(quantile(0.5, &buckets), Some(0.1));
        assert!((quantile(0.95, &buckets).unwrap() - 0.91).abs() < 1e-9);
        assert_eq!(quantile(0.5, &[(0.1, 0.0), (f64::INFINITY, 0.0)]), None);
        // Everything above the last finite bound: that bound is the answer, as Prometheus says.
        assert_eq!(quantile(0.5, &[(0.1, 0.0), (f64::INFINITY, 4.0)]), Some(0.1));
    }

    proptest! {
        #[test]
        fn a_quantile_lies_within_the_bounds_and_grows_with_q(
            counts in proptest::collection::vec(0f64..100.0, 1..8),
            q1 in 0f64..1.0,
            q2 in 0f64..1.0,
        ) {
            let mut cumulative = 0.0;
            let mut buckets: Vec<(f64, f64)> = counts.iter().enumerate().map(|(i, c)| {
                cumulative += c;
                ((i + 1) as f64, cumulative)
            }).collect();
            buckets.push((f64::INFINITY, cumulative));
            let (lo, hi) = if q1 <= q2 { (q1, q2) } else { (q2, q1) };
            if let (Some(a), Some(b)) = (quantile(lo, &buckets), quantile(hi, &buckets)) {
                prop_assert!(a <= b + 1e-9);
                prop_assert!((0.0..=counts.len() as f64).contains(&a));
            }
        }

        #[test]
        fn max_and_sum_bound_each_other(values in proptest::collection::vec(0f64..1e6, 1..8)) {
            let points: Vec<Point> = values.iter().enumerate().map(|(i, v)| p(&format!("i{i}"), 0, *v)).collect();
            let max = combine("up", &points).total[0].1;
            let sum = combine("some_gauge", &points).total[0].1;
            prop_assert!(max <= sum + 1e-6);
            prop_assert!(values.iter().all(|v| *v <= max));
            prop_assert!((sum - values.iter().sum::<f64>()).abs() < 1e-3);
        }

        #[test]
        fn rates_are_never_negative(values in proptest::collection::vec(0f64..1e9, 2..20)) {
            let points: Vec<Point> = values.iter().enumerate().map(|(i, v)| p("a", i as u64 * S, *v)).collect();
            let c = combine("n_total", &points);
            prop_assert_eq!(c.total.len(), values.len() - 1);
            prop_assert!(c.total.iter().all(|(_, r)| *r >= 0.0));
        }
    }
}
