//! `[[site]]`s and `[[rule]]`s: what loads, and errors that name the site's and the
//! rule's index and the field.

use super::{err, kind};
use crate::config::rules::{PathMatch, QueryParams, RuleAdmission};
use crate::config::{Config, UnknownHost};

/// A site with a valid origin, then `rest` (more of the site: `[[site.rule]]`s).
fn site(hosts: &str, rest: &str) -> String {
    format!("[[site]]\nhosts = {hosts}\n[site.origin]\nurl = \"http://127.0.0.1:1\"\n{rest}")
}

#[test]
fn sites_and_rules_load_with_their_origins_defaulting_to_origin() {
    let text = format!(
        "[origin]\nread_timeout = \"7s\"\n[server]\nunknown_host = \"default\"\n{}{}",
        site(
            r#"["A.example", "*.b.example"]"#,
            "[[site.rule]]\nglob = \"/v/**\"\nmethods = [\"GET\"]\nadmission = \"never\"\n\
             [[site.rule]]\npath = \"/q\"\nkeep_query = [\"id\"]\nsort_query = true\n\
             [[site.rule]]\npath = \"/t\"\ndefault_ttl = \"10m\"\ngrace = \"1h\"\n\
             ttl_by_status = { 404 = \"30s\", 200 = \"1m\" }\n",
        ),
        "[[rule]]\ncontent_type = [\"Image/\"]\nmin_size = \"1KiB\"\nadmission = \"always\"\n",
    );
    let config = Config::from_toml_str(&text).expect("loads");
    assert_eq!(config.server.unknown_host, UnknownHost::Default);
    let [site] = &config.sites[..] else {
        panic!("one site: {:?}", config.sites)
    };
    assert_eq!(site.hosts, ["a.example", "*.b.example"]);
    assert_eq!(site.origin.url, "http://127.0.0.1:1");
    assert_eq!(site.origin.read_timeout, std::time::Duration::from_secs(7));
    let rules = &site.rules.0;
    assert!(matches!(&rules[0].path, Some(PathMatch::Glob { pattern, .. }) if pattern == "/v/**"));
    assert_eq!(rules[0].methods, [http::Method::GET]);
    assert_eq!(rules[0].admission, Some(RuleAdmission::Never));
    let shape = rules[1].key.as_ref().expect("a key shape");
    let lifetimes = &rules[2].lifetimes;
    let secs = std::time::Duration::from_secs;
    assert_eq!(lifetimes.default_ttl, Some(secs(600)));
    assert_eq!(lifetimes.grace, Some(secs(3600)));
    let by_status = [
        (http::StatusCode::OK, secs(60)),
        (http::StatusCode::NOT_FOUND, secs(30)),
    ];
    assert_eq!(lifetimes.by_status, by_status);
    assert_eq!(shape.query, QueryParams::Keep(vec!["id".to_owned()]));
    assert!(shape.sort_query && !shape.ignore_port);
    let default = &config.rules.0[0];
    assert_eq!(default.content_types, ["image/"]);
    assert_eq!(default.min_size, Some(1024));
    // Without sites the answer for unknown hosts keeps its default, 421.
    assert_eq!(
        Config::from_toml_str("")
            .expect("loads")
            .server
            .unknown_host,
        UnknownHost::Misdirected
    );
}

#[test]
fn every_invalid_site_or_rule_is_rejected_naming_its_index_and_field() {
    let cases = [
        invalid_sites(),
        invalid_rule_matches_and_actions(),
        invalid_rule_lifetimes_and_combinations(),
    ]
    .concat();
    for (text, key) in &cases {
        let e = err(text);
        let shown = e.to_string();
        assert!(
            shown.starts_with(&format!("{key}: ")),
            "{text:?}: {shown:?} does not name {key}"
        );
        assert_eq!(kind(&e), "invalid-at", "{text:?}: {shown}");
    }
}

/// A site for `a.example` whose one `[[site.rule]]` has `body`.
fn rule(body: &str) -> String {
    site(r#"["a.example"]"#, &format!("[[site.rule]]\n{body}\n"))
}

/// Invalid sites (hosts, origin), each with the field its error must name.
fn invalid_sites() -> Vec<(String, &'static str)> {
    let second_site = |second: &str| format!("{}{}", site(r#"["a.example"]"#, ""), second);
    vec![
        (site("[]", ""), "site[0].hosts"),
        ("[[site]]\n".to_owned(), "site[0].hosts"),
        (site(r#"["a.example:8080"]"#, ""), "site[0].hosts"),
        (site(r#"["a.*.example"]"#, ""), "site[0].hosts"),
        (site(r#"["*"]"#, ""), "site[0].hosts"),
        (site(r#"["a.example", "A.example"]"#, ""), "site[0].hosts"),
        (second_site(&site(r#"["A.example"]"#, "")), "site[1].hosts"),
        (
            "[[site]]\nhosts = [\"a\"]\n[site.origin]\nurl = \"ftp://x\"\n".to_owned(),
            "site[0].origin.url",
        ),
        (
            "[[site]]\nhosts = [\"a\"]\n[site.origin]\nmax_in_flight = 0\n".to_owned(),
            "site[0].origin.max_in_flight",
        ),
    ]
}

/// Rules with an invalid match (path, glob, methods, type, size) or action (bypass, key,
/// admission), each with the field its error must name.
fn invalid_rule_matches_and_actions() -> Vec<(String, &'static str)> {
    vec![
        (
            rule("path = \"/a\"\nglob = \"/b\"\nbypass = true"),
            "site[0].rule[0].glob",
        ),
        (rule("path = \"a\"\nbypass = true"), "site[0].rule[0].path"),
        (
            rule("glob = \"/a/[\"\nbypass = true"),
            "site[0].rule[0].glob",
        ),
        (
            rule("methods = [\"G T\"]\nbypass = true"),
            "site[0].rule[0].methods",
        ),
        (
            rule("content_type = [\"\"]\nadmission = \"never\""),
            "site[0].rule[0].content_type",
        ),
        (
            rule("min_size = 10\nmax_size = 5\nadmission = \"never\""),
            "site[0].rule[0].max_size",
        ),
        (
            rule("max_size = \"lots\"\nadmission = \"never\""),
            "site[0].rule[0].max_size",
        ),
        (
            rule("content_type = [\"image/\"]\nbypass = true"),
            "site[0].rule[0].bypass",
        ),
        (
            rule("min_size = 1\nsort_query = true"),
            "site[0].rule[0].drop_query, keep_query, sort_query or ignore_port",
        ),
        (
            rule("bypass = true\nadmission = \"always\""),
            "site[0].rule[0].admission",
        ),
        (
            rule("drop_query = [\"a\"]\nkeep_query = [\"b\"]"),
            "site[0].rule[0].keep_query",
        ),
        (rule("path = \"/a\""), "site[0].rule[0]"),
    ]
}

/// Rules with invalid lifetimes, or valid alone but not with the policy or the rule beside
/// them, each with the field its error must name.
fn invalid_rule_lifetimes_and_combinations() -> Vec<(String, &'static str)> {
    vec![
        (
            rule("default_ttl = \"soon\""),
            "site[0].rule[0].default_ttl",
        ),
        (rule("grace = \"0s\""), "site[0].rule[0].grace"),
        (
            rule("ttl_by_status = { 206 = \"1m\" }"),
            "site[0].rule[0].ttl_by_status",
        ),
        (
            rule("ttl_by_status = { 404 = \"1m\", 0404 = \"2m\" }"),
            "site[0].rule[0].ttl_by_status",
        ),
        (
            rule("ttl_by_status = { 404 = \"never\" }"),
            "site[0].rule[0].ttl_by_status",
        ),
        (
            rule("content_type = [\"image/\"]\ndefault_ttl = \"1m\""),
            "site[0].rule[0].default_ttl, ttl_by_status or grace",
        ),
        (
            rule("bypass = true\ngrace = \"1m\""),
            "site[0].rule[0].default_ttl, ttl_by_status or grace",
        ),
        (
            format!(
                "[admission]\npolicy = \"always\"\n{}",
                rule("admission = \"second-hit\"")
            ),
            "site[0].rule[0].admission",
        ),
        (
            format!(
                "{}[[site.rule]]\nmethods = [\"GET\"]\n",
                rule("bypass = true")
            ),
            "site[0].rule[1]",
        ),
    ]
}

#[test]
fn unknown_host_needs_sites_and_a_known_answer() {
    let e = err("[server]\nunknown_host = \"421\"");
    assert!(e.to_string().starts_with("server.unknown_host: "), "{e}");
    let e = err(&format!(
        "[server]\nunknown_host = \"410\"\n{}",
        site(r#"["a"]"#, "")
    ));
    assert!(e.to_string().starts_with("server.unknown_host: "), "{e}");
    assert_eq!(kind(&e), "parse");
}

#[test]
fn an_unknown_rule_admission_names_the_site_rule_and_field_and_the_answers() {
    let cases = [
        (
            format!(
                "{}{}",
                site(r#"["a.example"]"#, ""),
                site(r#"["b"]"#, "[[site.rule]]\nadmission = \"sometimes\"\n")
            ),
            "site[1].rule[0].admission: ",
        ),
        (
            "[[rule]]\nadmission = \"maybe\"\n".to_owned(),
            "rule[0].admission: ",
        ),
    ];
    for (text, key) in &cases {
        let shown = err(text).to_string();
        assert!(
            shown.starts_with(key),
            "{text:?}: {shown:?} does not name {key}"
        );
        for answer in ["second-hit", "always", "never"] {
            assert!(shown.contains(answer), "{shown:?} does not list {answer}");
        }
    }
}

#[test]
fn too_many_rules_are_refused() {
    let rules = "[[site.rule]]\nbypass = true\n".repeat(65);
    let e = err(&site(r#"["a"]"#, &rules));
    assert!(e.to_string().starts_with("site[0].rule: "), "{e}");
}

#[test]
fn unknown_keys_of_sites_and_rules_are_refused() {
    let e = err(&site(r#"["a"]"#, "[[site.rule]]\nbogus = 1\n"));
    assert!(e.to_string().contains("bogus"), "{e}");
    assert_eq!(kind(&e), "parse");
    let e = err("[[site]]\nhosts = [\"a\"]\nbogus = 1\n");
    assert!(e.to_string().contains("bogus"), "{e}");
}
