//! The config fragment `--recommend` writes, and the verdict line it prints: the chosen
//! values as TOML that `secondhit check-config` accepts, each with the numbers behind it.

use std::fmt::Write as _;

use super::policy::{HEADROOM, Proposed, SMALL_WRITES, WriteBudget};
use super::{Recommendation, TIE};
use crate::report::{PolicyReport, human_bytes};
use secondhit_proxy::config::RotateMode;

/// One sentence: which policy, and what it saves or costs against the other.
pub(super) fn verdict(recommendation: &Recommendation) -> String {
    let mut verdict = policy_verdict(recommendation);
    let auto_as_good = |published: &PolicyReport| {
        let auto = recommendation.policies.iter().find(|row| row.best);
        recommendation.policy == Proposed::Auto
            && auto.is_some_and(|row| row.result.byte_hit_ratio + TIE >= published.byte_hit_ratio)
    };
    if let Some(published) = recommendation
        .published
        .as_ref()
        .filter(|p| !auto_as_good(p))
    {
        let behind = published.byte_hit_ratio - recommendation.second_hit.byte_hit_ratio;
        let over_always = published.byte_hit_ratio - recommendation.always.byte_hit_ratio;
        if behind > TIE && over_always > TIE {
            verdict.push_str(&format!(
                " At this size {} (a published policy the simulator runs, which secondhit \
                 does not implement) gets {:.2}% byte hits, {:.2} points more than second-hit \
                 and {:.2} more than always: here a better eviction would gain what \
                 admission gives up.",
                published.policy,
                published.byte_hit_ratio * 100.0,
                behind * 100.0,
                over_always * 100.0,
            ));
        } else if behind > TIE {
            verdict.push_str(&format!(
                " At this size {} (a published policy the simulator runs) gets {:.2}% byte \
                 hits, {:.2} points more than second-hit; always, which evicts as S3-FIFO \
                 does, is within a quarter point of it ({:.2}%).",
                published.policy,
                published.byte_hit_ratio * 100.0,
                behind * 100.0,
                recommendation.always.byte_hit_ratio * 100.0,
            ));
        }
    }
    verdict
}

/// Which of the proxy's policies, and what it saves or costs against the other.
fn policy_verdict(recommendation: &Recommendation) -> String {
    let (second, always) = (&recommendation.second_hit, &recommendation.always);
    let once = 100.0 * recommendation.trace.requested_once as f64
        / recommendation.trace.objects.max(1) as f64;
    match recommendation.policy {
        Proposed::Auto => auto_verdict(recommendation),
        Proposed::Always => format!(
            "second-hit costs hits on this trace at this size: {:.2}% byte hit ratio against \
             {:.2}% for always ({:.2} points less), for {:.1}% fewer disk write bytes. {} \
             Recommended: policy = \"always\", or \"shadow\" to measure the trade on live \
             traffic first (it stores like always and counts the writes second-hit would \
             avoid and the hits it would lose).",
            second.byte_hit_ratio * 100.0,
            always.byte_hit_ratio * 100.0,
            (always.byte_hit_ratio - second.byte_hit_ratio) * 100.0,
            fewer_writes(second, always),
            why_always(recommendation, once),
        ),
        Proposed::SecondHit => format!(
            "second-hit: {:.2}% byte hit ratio against {:.2}% for always ({:+.2} points), \
             writing {:.1}% fewer bytes to disk ({} against {}); {once:.1}% of the distinct \
             objects are requested once. Recommended: policy = \"second-hit\".",
            second.byte_hit_ratio * 100.0,
            always.byte_hit_ratio * 100.0,
            (second.byte_hit_ratio - always.byte_hit_ratio) * 100.0,
            fewer_writes(second, always),
            human_bytes(second.disk_write_bytes.unwrap_or(0)),
            human_bytes(always.disk_write_bytes.unwrap_or(0)),
        ),
    }
}

/// Why `auto`: its figures beside the other two's, and what its epochs did.
fn auto_verdict(recommendation: &Recommendation) -> String {
    let (second, always) = (&recommendation.second_hit, &recommendation.always);
    let auto = recommendation
        .policies
        .iter()
        .find(|row| row.result.policy == "auto")
        .map(|row| &row.result);
    let Some(auto) = auto else {
        return "Recommended: policy = \"auto\".".to_owned();
    };
    let run = &recommendation.auto_run;
    let under_always = 100.0 * run.requests_as_always as f64 / auto.requests.max(1) as f64;
    format!(
        "auto: {:.2}% byte hit ratio against {:.2}% for second-hit and {:.2}% for always, \
         writing {} ({} and {}): of the three, the fewest disk write bytes within {:.2} \
         points of the best. On the trace's clock it ended {} epochs of \
         admission.auto_epoch ({}), switched {} time{} and ran always for {:.1}% of the \
         requests. Recommended: policy = \"auto\".",
        auto.byte_hit_ratio * 100.0,
        second.byte_hit_ratio * 100.0,
        always.byte_hit_ratio * 100.0,
        human_bytes(auto.disk_write_bytes.unwrap_or(0)),
        human_bytes(second.disk_write_bytes.unwrap_or(0)),
        human_bytes(always.disk_write_bytes.unwrap_or(0)),
        TIE * 100.0,
        run.epochs,
        humantime::format_duration(recommendation.config.admission.auto_epoch),
        run.switches,
        if run.switches == 1 { "" } else { "s" },
        under_always,
    )
}

/// Why second-hit costs hits here, where `once` percent of the objects are requested once:
/// a cache that holds everything requested again is the case where the one-hit wonders,
/// however many, push nothing out, which a reader seeing their share would not guess.
fn why_always(recommendation: &Recommendation, once: f64) -> String {
    let trace = &recommendation.trace;
    // Always fetched each object once: every request after an object's first was a hit.
    let holds_everything = recommendation.always.origin_requests == Some(trace.objects);
    match holds_everything {
        true => format!(
            "{once:.1}% of the distinct objects are requested once, but at this size the \
             cache holds everything the trace requests again: always fetches each of the {} \
             objects from the origin once ({} of unique bytes), so the one-hit wonders it \
             stores push out nothing requested again. Keeping them out saves disk writes \
             only, and second-hit misses each object's second request.",
            trace.objects,
            human_bytes(trace.unique_bytes),
        ),
        false => format!(
            "It misses every object's second request, which pays off only where the one-hit \
             wonders it keeps out would push objects requested again out of the cache; here \
             {once:.1}% of the distinct objects are requested once."
        ),
    }
}

/// How many percent fewer body bytes `second` wrote to disk than `always`.
fn fewer_writes(second: &PolicyReport, always: &PolicyReport) -> f64 {
    let baseline = always.disk_write_bytes.unwrap_or(0);
    if baseline == 0 {
        return 0.0;
    }
    100.0 * (1.0 - second.disk_write_bytes.unwrap_or(0) as f64 / baseline as f64)
}

/// How the fragment is used, at its top: as a file in a directory the config includes.
const DROP_IN: &str = "\
# Save this as a file in a directory your config file includes, e.g.
# /etc/secondhit/conf.d/50-recommend.toml, which the packaged config's
# include = [\"/etc/secondhit/conf.d/*.toml\"] reads after the main file: these keys
# then replace the same keys of the main file, which keeps the others (drop
# admission.memory from it if it is set: it and expected_urls exclude each other).
# Check the result with `secondhit check-config /etc/secondhit/secondhit.toml`, and
# apply it with `systemctl reload secondhit` (max_size needs a restart).

";

/// The `[cache]` and `[admission]` fragment, every value with a comment saying why.
pub(super) fn write(recommendation: &Recommendation) -> String {
    let mut out = String::new();
    comment(
        &mut out,
        &format!(
            "From `secondhit simulate --recommend` on {}: {}.",
            recommendation.trace.workload,
            recommendation.trace.describe()
        ),
    );
    out.push_str(DROP_IN);
    write_cache(&mut out, recommendation);
    out.push('\n');
    write_admission(&mut out, recommendation);
    out
}

/// The `[cache]` table: the cache's size and, where it changes, the largest object stored.
fn write_cache(out: &mut String, recommendation: &Recommendation) {
    out.push_str("[cache]\n");
    comment(out, &recommendation.cache_size_reason);
    let _ = writeln!(
        out,
        "max_size = \"{}\"",
        config_size(recommendation.cache_size)
    );
    let limit = &recommendation.object_limit;
    if !limit.rows.is_empty() {
        let choice = if limit.chosen == limit.limit {
            "no larger limit simulated gained more than"
        } else {
            "of the limits simulated, the fewest disk write bytes within"
        };
        comment(
            out,
            &format!(
                "The configured {}; {choice} {:.2} points of the best byte hit ratio ({}).",
                limit.describe(),
                TIE * 100.0,
                rows_summary(&limit.rows)
            ),
        );
    }
    // A larger object could never be stored in this cache, and a max_size below
    // max_object_size is a config the proxy can refuse ("auto" is always within it).
    let named = recommendation.config.cache.max_object_size.explicit();
    if limit.chosen != limit.limit {
        let _ = writeln!(out, "max_object_size = \"{}\"", config_size(limit.chosen));
    } else if named.is_some_and(|size| size > recommendation.cache_size) {
        comment(
            out,
            "No larger object fits the cache, so none larger is written to disk.",
        );
        let max_object = config_size(recommendation.cache_size);
        let _ = writeln!(out, "max_object_size = \"{max_object}\"");
    }
}

/// The `[admission]` table: the policy, and the filters' generation and age.
fn write_admission(out: &mut String, recommendation: &Recommendation) {
    let admission = &recommendation.config.admission;
    out.push_str("[admission]\n");
    comment(out, &verdict(recommendation));
    let policy = recommendation.policy;
    let _ = writeln!(out, "policy = \"{}\"", policy.as_str());
    write_budget(out, recommendation);
    if policy == Proposed::Always {
        comment(
            out,
            "The filter keys below size shadow mode's filters, should you try it.",
        );
    }
    let chosen = recommendation
        .generation
        .iter()
        .find(|row| row.best)
        .map_or("", |row| row.setting.as_str());
    comment(
        out,
        &format!(
            "{chosen}: of the generations simulated at this cache size, the fewest disk write \
             bytes within {:.2} points of the best byte hit ratio ({}).",
            TIE * 100.0,
            rows_summary(&recommendation.generation)
        ),
    );
    let _ = writeln!(out, "expected_urls = {}", recommendation.expected_urls);
    let rotate = match admission.rotate {
        RotateMode::Fill => "fill",
        RotateMode::Auto => "auto",
    };
    let _ = writeln!(out, "rotate = \"{rotate}\"");
    let max_age_why = match &recommendation.max_age_reason {
        Some(reason) => format!("max_age: {reason}."),
        None => format!(
            "max_age: the fewest disk write bytes within {:.2} points of the best byte hit \
             ratio ({}).",
            TIE * 100.0,
            rows_summary(&recommendation.max_age)
        ),
    };
    comment(out, &max_age_why);
    let _ = writeln!(
        out,
        "max_age = \"{}\"",
        humantime::format_duration(admission.max_age)
    );
}

/// `max_write_rate` with why, or why none.
fn write_budget(out: &mut String, recommendation: &Recommendation) {
    let policy = recommendation.policy.as_str();
    match recommendation.write_budget {
        WriteBudget::Small { share } => comment(
            out,
            &format!(
                "No max_write_rate: {policy} writes {:.1}% of the bytes always writes (at \
                 most {:.0}%), so admission keeps the writes down already.",
                share * 100.0,
                SMALL_WRITES * 100.0
            ),
        ),
        WriteBudget::Cap {
            bytes_per_second,
            busiest_minute,
            share,
        } => {
            comment(
                out,
                &format!(
                    "max_write_rate: {policy} writes {:.1}% of the bytes always writes; in the \
                     trace's busiest minute it wrote {} ({} a second). With {:.0}% more, the \
                     trace's own traffic never meets the cap, and a burst of new objects \
                     beyond it is capped there (a fill past the minute's budget is skipped).",
                    share * 100.0,
                    human_bytes(busiest_minute),
                    human_bytes(busiest_minute / 60),
                    (HEADROOM - 1.0) * 100.0
                ),
            );
            let rate = config_size_up(bytes_per_second);
            let _ = writeln!(out, "max_write_rate = \"{rate}\"");
        }
    }
}

/// `expected_urls=40 30.12%/1.2 MiB, ...`: each candidate's byte hit ratio and writes.
fn rows_summary(rows: &[crate::SweepRow]) -> String {
    rows.iter()
        .map(|row| {
            format!(
                "{} {:.2}%/{}",
                row.setting,
                row.result.byte_hit_ratio * 100.0,
                human_bytes(row.result.disk_write_bytes.unwrap_or(0))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Appends `text` as `#` comment lines of at most about 90 columns.
fn comment(out: &mut String, text: &str) {
    // A unit stays on the line of its number.
    let mut words: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match words.last_mut() {
            Some(last)
                if ["B", "KiB", "MiB", "GiB", "TiB"]
                    .contains(&word.trim_end_matches([';', ')', '.', ','])) =>
            {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_owned()),
        }
    }
    let mut line = String::from("#");
    for word in &words {
        if line.len() + 1 + word.len() > 90 && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// A size the config parses, rounded down to at most 1% off: whole MiB or KiB, or bytes.
fn config_size(bytes: u64) -> String {
    config_size_by(bytes, |bytes, scale| bytes / scale)
}

/// A size the config parses, rounded up to at most 1% over.
fn config_size_up(bytes: u64) -> String {
    config_size_by(bytes, u64::div_ceil)
}

/// `bytes` in the largest unit of which it holds at least a hundred (or a whole number),
/// divided by `divide`.
fn config_size_by(bytes: u64, divide: fn(u64, u64) -> u64) -> String {
    for (unit, scale) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes / scale >= 100 || bytes.is_multiple_of(scale) && bytes >= scale {
            return format!("{}{unit}", divide(bytes, scale));
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_written_as_the_config_parses_them() {
        assert_eq!(config_size(1 << 20), "1MiB");
        assert_eq!(config_size((63 << 20) + (1 << 19)), "65024KiB");
        assert_eq!(config_size(5 << 30), "5GiB");
        assert_eq!(config_size(150 << 30), "150GiB");
        assert_eq!(config_size(999), "999");
        for bytes in [999, 1 << 20, (63 << 20) + 12_345, 5 << 30] {
            let parsed: bytesize::ByteSize = config_size(bytes).parse().expect("a size");
            assert!(parsed.as_u64() <= bytes && parsed.as_u64() as f64 >= 0.99 * bytes as f64);
            let parsed: bytesize::ByteSize = config_size_up(bytes).parse().expect("a size");
            assert!(parsed.as_u64() >= bytes && parsed.as_u64() as f64 <= 1.01 * bytes as f64);
        }
    }

    #[test]
    fn comments_wrap_without_losing_words() {
        let mut out = String::new();
        let text = "word ".repeat(50);
        comment(&mut out, &text);
        assert!(out.lines().all(|l| l.starts_with("# ") && l.len() <= 90));
        assert_eq!(out.split_whitespace().filter(|w| *w == "word").count(), 50);
    }
}
