//! Unit tests of seeds, decisions and policy assembly.

use super::*;

#[test]
fn configured_seed_wins_and_is_stable() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(SEED_FILE), "0123456789abcdef\n").unwrap();
    let a = resolve_seed(Some("edge-secret"), dir.path()).unwrap();
    let b = resolve_seed(Some("edge-secret"), dir.path()).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, xxh3_64(b"edge-secret"));
    assert_ne!(a, resolve_seed(Some("other-secret"), dir.path()).unwrap());
    // The seed file was neither used nor touched.
    let kept = fs::read_to_string(dir.path().join(SEED_FILE)).unwrap();
    assert_eq!(kept, "0123456789abcdef\n");
}

#[test]
fn generated_seed_persists() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let first = resolve_seed(None, &state).unwrap();
    let second = resolve_seed(None, &state).unwrap();
    assert_eq!(first, second);
    let text = fs::read_to_string(state.join(SEED_FILE)).unwrap();
    assert_eq!(text, format!("{first:016x}\n"));
    // Only the seed file is left behind, no temp file.
    assert_eq!(fs::read_dir(&state).unwrap().count(), 1);
}

#[test]
fn existing_seed_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(SEED_FILE), "00000000000000ff").unwrap();
    assert_eq!(resolve_seed(None, dir.path()).unwrap(), 0xff);
    fs::write(dir.path().join(SEED_FILE), "fedcba9876543210\n").unwrap();
    assert_eq!(
        resolve_seed(None, dir.path()).unwrap(),
        0xfedc_ba98_7654_3210
    );
}

#[test]
fn malformed_seed_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SEED_FILE);
    for bad in [
        "",
        "xyz",
        "0123456789ABCDEF\n",
        "0123456789abcde\n",
        "0123456789abcdef0\n",
        "0123456789abcdef\n\n",
        " 123456789abcdef\n",
    ] {
        fs::write(&path, bad).unwrap();
        let err = resolve_seed(None, dir.path()).unwrap_err();
        match &err {
            AdmissionError::BadSeedFile { path: named, .. } => assert_eq!(named, &path),
            other => panic!("{bad:?}: expected BadSeedFile, got {other:?}"),
        }
        assert!(err.to_string().contains(&path.display().to_string()));
        // Never silently replaced.
        assert_eq!(fs::read_to_string(&path).unwrap(), bad);
    }
}

#[test]
fn unreadable_seed_path_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be: reading it fails with something other than NotFound.
    fs::create_dir(dir.path().join(SEED_FILE)).unwrap();
    let err = resolve_seed(None, dir.path()).unwrap_err();
    assert!(
        matches!(&err, AdmissionError::SeedFile { path, .. } if path == &dir.path().join(SEED_FILE)),
        "{err:?}"
    );
}

#[test]
fn hasher_is_keyed() {
    let a = FilterHasher::new(1);
    let b = FilterHasher::new(2);
    assert_eq!(a.hash(b"/index.html"), a.hash(b"/index.html"));
    assert_ne!(a.hash(b"/index.html"), b.hash(b"/index.html"));
    assert_ne!(a.hash(b"/index.html"), a.hash(b"/other.html"));
    assert!(
        !format!("{a:?}").contains('1'),
        "Debug must not print the seed"
    );
}

#[test]
fn always_admit_admits_everything() {
    let policy = AlwaysAdmit;
    for i in 0..1_000u64 {
        let decision = decide(&policy, FilterHash(u128::from(i)));
        assert_eq!(decision, Decision::Admit(AdmitReason::Always));
    }
    assert_eq!(policy.memory_bytes(), 0);
    assert_eq!(policy.kind(), AdmissionPolicy::Always.into());
}

#[test]
fn policies_from_config() {
    let mut config = AdmissionConfig::default();
    let pair = from_config(&config).stats;
    assert_eq!(pair.kind(), AdmissionPolicy::SecondHit.into());
    let stats = pair.filter_stats().unwrap();
    assert_eq!(stats.params.generation_size, 1_000_000);
    assert_eq!(stats.generation_target, 1_000_000);
    // Without a cache to count, auto takes its upper clamp.
    config.rotate = RotateMode::Auto;
    let auto = from_config(&config).stats.filter_stats().unwrap();
    assert_eq!(auto.generation_target, 1_000_000);
    config.policy = AdmissionPolicy::Always;
    assert_eq!(
        from_config(&config).stats.kind(),
        AdmissionPolicy::Always.into()
    );
    assert!(from_config(&config).stats.filter_stats().is_none());
}

#[test]
fn assemble_keeps_snapshots_for_filters_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AdmissionConfig {
        rotate: RotateMode::Auto,
        ..AdmissionConfig::default()
    };
    let objects: ObjectCount = Arc::new(|| 50_000);
    let built = assemble(&config, dir.path(), objects.clone()).unwrap();
    assert_eq!(built.stats.kind(), AdmissionPolicy::SecondHit.into());
    // rotate = "auto": two keys per object the cache holds, before any steering.
    assert_eq!(
        built.stats.filter_stats().unwrap().generation_target,
        100_000
    );
    let snapshots = built.snapshots.unwrap();
    assert_eq!(snapshots.path(), dir.path().join(SNAPSHOT_FILE));
    config.policy = AdmissionPolicy::Always;
    let always = assemble(&config, dir.path(), objects.clone()).unwrap();
    assert!(always.snapshots.is_none());
    // Shadow keeps the same pair, snapshotted like second-hit's.
    config.policy = AdmissionPolicy::Shadow;
    let shadow = assemble(&config, dir.path(), objects).unwrap();
    assert_eq!(shadow.stats.kind(), AdmissionPolicy::Shadow.into());
    assert!(shadow.stats.filter_stats().is_some());
    assert!(shadow.snapshots.is_some());
    // Both resolved the same generated seed.
    assert_eq!(always.hasher.hash(b"k"), built.hasher.hash(b"k"));
}

#[test]
fn decision_tokens() {
    let cases = [
        (
            Decision::Admit(AdmitReason::SeenBefore),
            true,
            "seen-before",
        ),
        (Decision::Admit(AdmitReason::Always), true, "always"),
        (
            Decision::Admit(AdmitReason::AlreadyStored),
            true,
            "already-stored",
        ),
        (
            Decision::Admit(AdmitReason::Shadowed(RejectReason::FirstSight)),
            true,
            "shadow-first-sight",
        ),
        (
            Decision::Reject(RejectReason::FirstSight),
            false,
            "first-sight",
        ),
        (Decision::Admit(AdmitReason::Rule), true, "rule-always"),
        (Decision::Reject(RejectReason::Rule), false, "rule-never"),
        (
            Decision::Admit(AdmitReason::AutoAlways),
            true,
            "auto-always",
        ),
        (
            Decision::Admit(AdmitReason::AutoSeenBefore),
            true,
            "auto-seen-before",
        ),
        (
            Decision::Reject(RejectReason::AutoFirstSight),
            false,
            "auto-first-sight",
        ),
    ];
    for (decision, admit, token) in cases {
        assert_eq!(decision.is_admit(), admit);
        assert_eq!(decision.as_str(), token);
        assert_eq!(Decision::ALL[decision.index()], decision);
    }
    assert_eq!(cases.len(), Decision::ALL.len());
}

/// A policy that decides by the response's declared size, as a new policy file would: the
/// two traits and nothing else.
struct AtMost(u64);

impl Admission for AtMost {
    fn on_request(&self, hash: FilterHash) -> Pending {
        Pending::new(hash, Decision::Admit(AdmitReason::Always))
    }

    fn on_response(&self, pending: Pending, response: &ResponseInfo<'_>) -> Decision {
        match response.size {
            Some(size) if size <= self.0 => pending.planned,
            _ => Decision::Reject(RejectReason::FirstSight),
        }
    }
}

impl AdmissionStats for AtMost {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Custom("at-most")
    }

    fn memory_bytes(&self) -> u64 {
        0
    }
}

#[test]
fn a_policy_can_decide_by_the_response_and_a_rule_overrides_it() {
    let policy = Policy::new(Arc::new(AtMost(10)));
    let pending = policy.admission.on_request(FilterHash(1));
    assert_eq!(pending.planned, Decision::Admit(AdmitReason::Always));
    let sized = |size| ResponseInfo {
        size,
        content_type: Some("text/html"),
        status: 200,
    };
    let small = policy.admission.on_response(pending, &sized(Some(10)));
    assert_eq!(small, Decision::Admit(AdmitReason::Always));
    let large = policy.admission.on_response(pending, &sized(Some(11)));
    assert_eq!(large, Decision::Reject(RejectReason::FirstSight));
    let unknown = policy.admission.on_response(pending, &sized(None));
    assert!(!unknown.is_admit());
    assert_eq!(
        large.overridden_by(RuleAdmission::Always),
        Decision::Admit(AdmitReason::Rule)
    );
    assert_eq!(
        small.overridden_by(RuleAdmission::Never),
        Decision::Reject(RejectReason::Rule)
    );
    assert_eq!(policy.stats.kind(), PolicyKind::Custom("at-most"));
    assert_eq!(policy.stats.kind().as_str(), "at-most");
    assert!(policy.stats.filter_stats().is_none());
    assert_eq!(policy.stats.rotate(), None);
}

#[test]
fn pending_is_a_small_copy_value() {
    // Carried on the hit path, across the store lookup: the hash and the plan, no more.
    assert!(std::mem::size_of::<Pending>() <= 32);
}

#[test]
fn a_second_hit_rule_keeps_first_sights_out_while_auto_runs_always() {
    use crate::settings::RuleAdmission;
    let params = FilterParams::for_expected_keys(1_000, 0.01);
    let pair = AgingPair::new(
        params,
        std::time::Duration::from_secs(60),
        Rotation::Fill,
        std::time::Instant::now(),
    );
    let auto = Auto::new(Arc::new(pair));
    auto.set_mode(AutoMode::Always);
    let first = decide(&auto, FilterHash(5));
    assert_eq!(first, Decision::Admit(AdmitReason::AutoAlways));
    assert_eq!(
        first.overridden_by(RuleAdmission::SecondHit),
        Decision::Reject(RejectReason::AutoFirstSight)
    );
    let again = decide(&auto, FilterHash(5));
    assert_eq!(again.overridden_by(RuleAdmission::SecondHit), again);
    assert!(again.is_admit());
}
