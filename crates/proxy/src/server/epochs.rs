//! The epoch task: every `admission.auto_epoch` it ends the miss-ratio estimates' epoch
//! and, under `policy = "auto"`, runs the candidate they choose (`tuning::choose`),
//! logging each switch with the figures behind it.

use crate::live::{Live, Snapshot};
use crate::tuning::choose::{Rules, Verdict};
use crate::tuning::{Ended, mode_of};

/// Ends an epoch every `admission.auto_epoch` of the settings in use (on tokio's clock,
/// paused in tests), until the task is aborted.
pub(super) async fn run(live: Live) {
    loop {
        let every = live.load().settings.admission.auto_epoch;
        tokio::time::sleep(every).await;
        end_epoch(&live);
    }
}

/// Ends the miss-ratio estimates' epoch now, as the epoch task does every
/// `admission.auto_epoch`, and under `policy = "auto"` runs what they choose: for tests
/// and tools that drive the epochs themselves.
pub fn end_epoch(live: &Live) {
    end_snapshot_epoch(&live.load_full());
}

/// Ends `snapshot`'s epoch and applies the choice to its `auto` policy, if it runs one.
fn end_snapshot_epoch(snapshot: &Snapshot) {
    let settings = &snapshot.settings;
    let rules = Rules {
        objective: settings.admission.optimize,
        max_write_rate: settings.admission.max_write_rate,
    };
    let now = tokio::time::Instant::now().into_std();
    let ended = snapshot.tuning.end_epoch(settings, now, &rules);
    let Some(auto) = &snapshot.admission.auto else {
        tracing::debug!(
            verdict = ended.verdict.as_str(),
            "miss-ratio estimates: epoch ended"
        );
        return;
    };
    auto.set_mode(mode_of(ended.current));
    log(&ended, &rules);
}

/// The epoch's choice: a switch at info, with each candidate's figures; else debug.
fn log(ended: &Ended, rules: &Rules) {
    let figures: Vec<String> = (ended.scores.iter())
        .map(|s| {
            format!(
                "{}: miss {:.2}%, writes {:.0} B/s",
                s.candidate,
                s.miss_ratio * 100.0,
                s.write_rate
            )
        })
        .collect();
    let figures = figures.join("; ");
    let objective = match rules.objective {
        crate::config::Optimize::Bytes => "bytes",
        crate::config::Optimize::Objects => "objects",
    };
    match ended.verdict {
        Verdict::Switched | Verdict::OverBudget => tracing::info!(
            from = %ended.before,
            to = %ended.current,
            why = ended.verdict.as_str(),
            optimize = objective,
            max_write_rate = rules.max_write_rate,
            %figures,
            "admission.policy = \"auto\" switched"
        ),
        verdict => tracing::debug!(
            running = %ended.current,
            verdict = verdict.as_str(),
            %figures,
            "admission.policy = \"auto\": epoch ended"
        ),
    }
}
