use super::*;
use crate::workload::Request;

fn row(setting: &str, byte_hit_ratio: f64, disk_write_bytes: u64) -> SweepRow {
    SweepRow {
        setting: setting.to_owned(),
        result: PolicyReport {
            policy: "second-hit".into(),
            requests: 100,
            failed_requests: 0,
            hit_ratio: byte_hit_ratio,
            byte_hit_ratio,
            disk_write_objects: Some(disk_write_bytes / 100),
            disk_write_bytes: Some(disk_write_bytes),
            origin_requests: None,
            origin_bytes: None,
            admission_memory_bytes: None,
            throughput_rps: None,
            p50_ms: None,
            p99_ms: None,
            p999_ms: None,
        },
        best: false,
    }
}

#[test]
fn the_choice_is_the_fewest_writes_among_the_rows_as_good_as_the_best() {
    let mut rows = vec![
        row("a", 0.30, 100),
        row("b", 0.402, 900),
        row("c", 0.40, 500),
        row("d", 0.40, 500),
        row("e", 0.35, 10),
    ];
    // b is best; c and d are within a quarter point and write less; c comes first.
    assert_eq!(mark_choice(&mut rows), 2);
    assert_eq!(
        rows.iter().map(|r| r.best).collect::<Vec<_>>(),
        [false, false, true, false, false]
    );
}

#[test]
fn curve_sizes_are_the_shares_and_the_given_size_in_order() {
    assert_eq!(
        curve_sizes(10_000, Some(1_234)),
        [100, 200, 500, 1_000, 1_234, 2_000, 5_000, 10_000]
    );
    assert_eq!(curve_sizes(10_000, Some(500)).len(), CURVE_SHARES.len());
}

/// Every object requested three times in a row: no one-hit wonders, so second-hit (a hit
/// on the third request) must lose to always (hits on the second and third).
fn three_of_each(objects: u64) -> Workload {
    Workload {
        name: "three of each".into(),
        requests: (0..objects * 3)
            .map(|i| Request {
                object: i / 3,
                size: 1_000,
                at: i as f64,
            })
            .collect(),
        malformed_lines: 0,
        ignored_lines: 0,
    }
}

#[test]
fn a_trace_without_one_hit_wonders_gets_always_and_says_why() {
    let policies = ["second-hit".to_owned(), "always".to_owned()];
    let recommendation = recommend(&three_of_each(200), &policies, None, None).expect("runs");
    assert!(recommendation.second_hit_costs_hits());
    assert!((recommendation.always.hit_ratio - 2.0 / 3.0).abs() < 1e-9);
    let text = recommendation.to_text();
    assert!(
        text.contains("second-hit costs hits on this trace"),
        "{text}"
    );
    assert!(
        text.contains(
            "0.0% of the distinct objects are requested once, but at this size the cache \
             holds everything the trace requests again"
        ),
        "{text}"
    );
    let config = Config::from_toml_str(&recommendation.fragment)
        .unwrap_or_else(|e| panic!("{e}\n{}", recommendation.fragment));
    assert_eq!(
        config.admission.policy,
        secondhit_proxy::config::AdmissionPolicy::Always
    );
    assert_eq!(config.cache.max_size, recommendation.cache_size);
}

#[test]
fn recommend_needs_both_policies_it_compares() {
    let error = recommend(&three_of_each(5), &["always".to_owned()], None, None)
        .expect_err("second-hit missing");
    assert!(error.contains("keep second-hit"), "{error}");
}

#[test]
fn a_trace_too_short_for_max_age_keeps_the_configured_one() {
    // 600 requests one second apart: ten minutes, shorter than every max_age but 5m.
    let policies = ["second-hit".to_owned(), "always".to_owned()];
    let recommendation = recommend(&three_of_each(200), &policies, None, None).expect("runs");
    let reason = recommendation.max_age_reason.clone().expect("all alike");
    assert!(reason.contains("keeps 1h"), "{reason}");
    assert!(recommendation.fragment.contains("max_age = \"1h\""));
}
