//! Which setting `policy = "auto"` runs: a pure function of the estimates, so that the
//! proxy's epoch task and the simulator choose alike.
//!
//! At each epoch's end the candidates the proxy can run ([`RUNNABLE`]) are scored at the
//! configured size: the miss ratio `admission.optimize` names, and the bytes a second
//! they would write. Under a write budget only those within it compete (when none is, the
//! one writing least wins). The best replaces the one running only when it misses
//! `MARGIN` less for `EPOCHS` epochs running ([`Hysteresis`]): estimates of two close
//! policies swing with the sample, and each switch costs a fill-up of first sights (to
//! `always`) or their misses (to `second-hit`). One that runs over the budget while
//! another fits is left at once: the store is refusing its fills already.

use super::candidate::Candidate;
use super::estimate::Estimate;
use secondhit_admission::settings::Optimize;

/// The candidates the proxy can run, the one it starts with first.
pub const RUNNABLE: [Candidate; 2] = [Candidate::SECOND_HIT, Candidate::ALWAYS];

/// How much less a challenger must miss (a share of requests or bytes): half a point.
pub(crate) const MARGIN: f64 = 0.005;

/// Epochs running a challenger must lead by [`MARGIN`] before it runs.
pub(crate) const EPOCHS: u32 = 2;

/// The fewest (decayed) requests an estimate must count before it decides anything.
pub(crate) const MIN_REQUESTS: f64 = 100.0;

/// What the choice minimises and within what.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rules {
    /// Miss ratio in objects or bytes.
    pub objective: Optimize,
    /// `admission.max_write_rate`, bytes a second.
    pub max_write_rate: Option<u64>,
}

/// One runnable candidate's figures at the configured size.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Score {
    /// The candidate.
    pub candidate: Candidate,
    /// Its estimated miss ratio, in what `Rules::objective` names.
    pub miss_ratio: f64,
    /// Its estimated writes, bytes a second.
    pub write_rate: f64,
}

/// What the choice remembers between epochs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hysteresis {
    /// The candidate running.
    pub current: Candidate,
    /// A challenger leading by the margin, and for how many epochs running.
    pub leader: Option<(Candidate, u32)>,
}

impl Default for Hysteresis {
    /// `second-hit` runs first, unchallenged.
    fn default() -> Self {
        Hysteresis {
            current: RUNNABLE[0],
            leader: None,
        }
    }
}

/// What one epoch's choice did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Too few requests counted to decide.
    TooFewRequests,
    /// The one running stays: best, or not beaten by the margin.
    Stay,
    /// A challenger leads by the margin, for this many epochs running.
    Leading(Candidate, u32),
    /// Switched to the best, which led by the margin for `EPOCHS` epochs.
    Switched,
    /// Switched at once: the one running wrote over the budget, this one does not (or
    /// writes least).
    OverBudget,
}

impl Verdict {
    /// Whether the candidate running changed.
    pub fn switched(self) -> bool {
        matches!(self, Verdict::Switched | Verdict::OverBudget)
    }

    /// A word for logs and `/stats`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::TooFewRequests => "too-few-requests",
            Verdict::Stay => "stay",
            Verdict::Leading(..) => "leading",
            Verdict::Switched => "switched",
            Verdict::OverBudget => "over-budget",
        }
    }
}

/// The [`RUNNABLE`] candidates' scores in `estimate` at the configured size (factor 1),
/// over `seconds` of traffic (decayed as the counts are); empty when it counted fewer
/// than `MIN_REQUESTS` requests.
pub fn scores(estimate: &Estimate, objective: Optimize, seconds: f64) -> Vec<Score> {
    RUNNABLE
        .iter()
        .filter_map(|&candidate| {
            let point = estimate.point(candidate, 1.0)?;
            (point.requests >= MIN_REQUESTS).then(|| Score {
                candidate,
                miss_ratio: match objective {
                    Optimize::Bytes => point.byte_miss_ratio,
                    Optimize::Objects => point.object_miss_ratio,
                },
                write_rate: if seconds > 0.0 {
                    point.written_bytes / seconds
                } else {
                    0.0
                },
            })
        })
        .collect()
}

/// The next state and what this epoch did, from `state` and this epoch's `scores`.
pub fn choose(state: Hysteresis, scores: &[Score], rules: &Rules) -> (Hysteresis, Verdict) {
    let Some(best) = best(scores, rules.max_write_rate) else {
        return (
            Hysteresis {
                leader: None,
                ..state
            },
            Verdict::TooFewRequests,
        );
    };
    let stay = Hysteresis {
        leader: None,
        ..state
    };
    if best.candidate == state.current {
        return (stay, Verdict::Stay);
    }
    let switch = Hysteresis {
        current: best.candidate,
        leader: None,
    };
    let Some(current) = scores.iter().find(|s| s.candidate == state.current) else {
        return (switch, Verdict::OverBudget);
    };
    let over = |score: &Score| {
        rules
            .max_write_rate
            .is_some_and(|b| score.write_rate > b as f64)
    };
    if over(current) && best.write_rate < current.write_rate {
        return (switch, Verdict::OverBudget);
    }
    if current.miss_ratio - best.miss_ratio < MARGIN {
        return (stay, Verdict::Stay);
    }
    let epochs = match state.leader {
        Some((leader, epochs)) if leader == best.candidate => epochs + 1,
        _ => 1,
    };
    if epochs >= EPOCHS {
        return (switch, Verdict::Switched);
    }
    let leading = Hysteresis {
        leader: Some((best.candidate, epochs)),
        ..state
    };
    (leading, Verdict::Leading(best.candidate, epochs))
}

/// The score that misses least among those within `budget` (writing less breaks a tie),
/// or, when none is, the one writing least.
fn best(scores: &[Score], budget: Option<u64>) -> Option<Score> {
    let fits = |s: &&Score| budget.is_none_or(|b| s.write_rate <= b as f64);
    let by_misses = |a: &&Score, b: &&Score| {
        (a.miss_ratio, a.write_rate)
            .partial_cmp(&(b.miss_ratio, b.write_rate))
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    let by_writes = |a: &&Score, b: &&Score| a.write_rate.total_cmp(&b.write_rate);
    match scores.iter().filter(fits).min_by(by_misses) {
        Some(best) => Some(*best),
        None => scores.iter().min_by(by_writes).copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SH: Candidate = Candidate::SECOND_HIT;
    const AL: Candidate = Candidate::ALWAYS;

    fn score(candidate: Candidate, miss_ratio: f64, write_rate: f64) -> Score {
        Score {
            candidate,
            miss_ratio,
            write_rate,
        }
    }

    const FREE: Rules = Rules {
        objective: Optimize::Bytes,
        max_write_rate: None,
    };

    #[test]
    fn a_better_candidate_runs_only_after_leading_by_the_margin_two_epochs_running() {
        let scores = [score(SH, 0.40, 10.0), score(AL, 0.30, 100.0)];
        let (state, verdict) = choose(Hysteresis::default(), &scores, &FREE);
        assert_eq!(verdict, Verdict::Leading(AL, 1));
        assert_eq!(state.current, SH, "one epoch is not enough");
        let (state, verdict) = choose(state, &scores, &FREE);
        assert_eq!(verdict, Verdict::Switched);
        assert_eq!(state.current, AL);
        // And it stays while it is best.
        assert_eq!(choose(state, &scores, &FREE), (state, Verdict::Stay));
    }

    #[test]
    fn a_lead_broken_for_one_epoch_starts_over() {
        let ahead = [score(SH, 0.40, 10.0), score(AL, 0.30, 100.0)];
        let level = [score(SH, 0.40, 10.0), score(AL, 0.398, 100.0)];
        let (state, _) = choose(Hysteresis::default(), &ahead, &FREE);
        let (state, verdict) = choose(state, &level, &FREE);
        assert_eq!(verdict, Verdict::Stay, "within the margin: no switch");
        assert_eq!(state.leader, None);
        let (state, verdict) = choose(state, &ahead, &FREE);
        assert_eq!(verdict, Verdict::Leading(AL, 1));
        assert_eq!(state.current, SH);
    }

    #[test]
    fn within_a_budget_the_best_that_fits_wins_and_over_it_the_least_writing() {
        let budget = Rules {
            max_write_rate: Some(50),
            ..FREE
        };
        // `always` misses less but writes over the budget: never chosen.
        let scores = [score(SH, 0.40, 10.0), score(AL, 0.30, 100.0)];
        let mut state = Hysteresis::default();
        for _ in 0..4 {
            let (next, verdict) = choose(state, &scores, &budget);
            assert_eq!(verdict, Verdict::Stay);
            state = next;
        }
        // Running `always` over the budget: back to `second-hit` at once.
        let running_always = Hysteresis {
            current: AL,
            leader: None,
        };
        let (state, verdict) = choose(running_always, &scores, &budget);
        assert_eq!((state.current, verdict), (SH, Verdict::OverBudget));
        // Neither fits: the one writing least.
        let both_over = [score(SH, 0.40, 80.0), score(AL, 0.30, 100.0)];
        let (state, verdict) = choose(running_always, &both_over, &budget);
        assert_eq!((state.current, verdict), (SH, Verdict::OverBudget));
    }

    #[test]
    fn without_enough_requests_nothing_changes() {
        let (state, verdict) = choose(Hysteresis::default(), &[], &FREE);
        assert_eq!(
            (state, verdict),
            (Hysteresis::default(), Verdict::TooFewRequests)
        );
    }
}
