use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

proptest! {
    /// `check_host` skips parsing a `Host` in the cache key's normal form: every such
    /// value must be one the full check accepts.
    #[test]
    fn a_host_in_normal_form_passes_the_full_check(raw in "[a-z0-9.-]{0,8}(:(80|080|0|[0-9]{0,6}))?|[a-zA-Z0-9.:@\\[\\]-]{0,12}") {
        if crate::key::is_normal_authority(&raw, 80) || crate::key::is_normal_authority(&raw, 443) {
            prop_assert!(host_authority(raw.as_bytes()).is_ok(), "{raw:?}");
        }
    }
}

fn head(version: Version, uri: &str, headers: &[(&str, &str)]) -> request::Parts {
    let mut builder = http::Request::builder().version(version).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).expect("test request").into_parts().0
}

/// What a request sent to the origin for `request` from `client` carries: hop-by-hop
/// fields removed on arrival, the forwarding fields added on the way out.
fn forward(request: &mut request::Parts, client: IpAddr) {
    forward_over(request, client, ClientScheme::Http);
}

/// [`forward`] for a request that came in over `scheme`.
fn forward_over(request: &mut request::Parts, client: IpAddr, scheme: ClientScheme) {
    crate::origin::strip_hop_by_hop(&mut request.headers);
    let connection = ClientConnection { ip: client, scheme };
    let forwarding = Forwarding::of(request, connection);
    let ours = forwarding.lines(&request.headers);
    let theirs = (request.headers.iter()).filter(|(name, _)| !is_forwarding_field(name));
    let mut sent = FieldLines::new(theirs).as_bytes().to_vec();
    sent.extend_from_slice(ours.as_bytes());
    request.headers = read_lines(&sent);
}

/// The fields of `lines`, read as an origin reads them: each line a field, in order.
fn read_lines(lines: &[u8]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for line in lines.split_inclusive(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r\n").expect("CRLF line ends");
        let colon = line.iter().position(|&b| b == b':').expect("a field line");
        let value = line[colon + 1..]
            .strip_prefix(b" ")
            .expect("a space after the colon");
        let name = HeaderName::from_bytes(&line[..colon]).expect("a field name");
        headers.append(name, HeaderValue::from_bytes(value).expect("a field value"));
    }
    headers
}

fn check(version: Version, uri: &str, headers: &[(&str, &str)]) -> Result<(), Rejection> {
    check_request(&mut head(version, uri, headers))
}

#[test]
fn the_token_characters_are_those_rfc_9110_lists() {
    for b in 0..=u8::MAX {
        let listed = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        assert_eq!(TCHAR[usize::from(b)], listed, "byte {b:#04x}");
    }
    assert!(is_token("127.0.0.1") && !is_token("127.0.0.1:80") && !is_token(""));
}

#[test]
fn one_host_is_required_in_http_1_1_and_optional_elsewhere() {
    assert_eq!(check(Version::HTTP_11, "/", &[("host", "a")]), Ok(()));
    assert_eq!(
        check(Version::HTTP_11, "/", &[]),
        Err(Rejection::MissingHost)
    );
    assert_eq!(check(Version::HTTP_10, "/", &[]), Ok(()));
    assert_eq!(check(Version::HTTP_2, "http://a/", &[]), Ok(()));
    assert_eq!(
        check(Version::HTTP_11, "/", &[("host", "a"), ("host", "a")]),
        Err(Rejection::SeveralHosts)
    );
}

#[test]
fn host_must_be_a_host_and_optional_port() {
    for bad in ["", "user@a", "a b", "a:port", "a:99999"] {
        assert_eq!(
            check(Version::HTTP_11, "/", &[("host", bad)]),
            Err(Rejection::InvalidHost),
            "{bad:?}"
        );
    }
    for good in ["a", "a:8080", "a:", "[::1]:80", "127.0.0.1"] {
        assert_eq!(
            check(Version::HTTP_11, "/", &[("host", good)]),
            Ok(()),
            "{good:?}"
        );
    }
}

#[test]
fn target_authority_must_name_the_host_with_default_ports_and_any_case() {
    let same = [
        ("http://Example.COM/x", "example.com"),
        ("http://example.com:80/x", "example.com"),
        ("http://example.com/x", "EXAMPLE.com:80"),
        ("https://example.com/x", "example.com:443"),
        ("http://[::1]:8080/x", "[::1]:8080"),
    ];
    for (uri, host) in same {
        assert_eq!(
            check(Version::HTTP_11, uri, &[("host", host)]),
            Ok(()),
            "{uri} {host}"
        );
    }
    let different = [
        ("http://example.com/x", "other.com"),
        ("http://example.com:8080/x", "example.com"),
        ("https://example.com/x", "example.com:80"),
    ];
    for (uri, host) in different {
        assert_eq!(
            check(Version::HTTP_11, uri, &[("host", host)]),
            Err(Rejection::HostMismatch),
            "{uri} {host}"
        );
    }
    assert_eq!(
        check(Version::HTTP_2, "http://a/x", &[("host", "b")]),
        Err(Rejection::HostMismatch)
    );
    assert_eq!(
        check(Version::HTTP_11, "http://u@a/x", &[("host", "a")]),
        Err(Rejection::InvalidHost)
    );
}

#[test]
fn only_a_marker_with_the_connection_token_rejects() {
    let token = ConnectionToken::random().expect("random token");
    let other = ConnectionToken::random().expect("random token");
    for reason in Rejection::ALL {
        assert_eq!(Rejection::from_word(reason.as_str()), Some(reason));
        let marker = format!(
            "{} {}",
            std::str::from_utf8(token.as_bytes()).expect("hex"),
            reason.as_str()
        );
        let mut request = head(
            Version::HTTP_11,
            "/",
            &[("host", "a"), ("x-secondhit-rejected", &marker)],
        );
        request.extensions.insert(token);
        assert_eq!(check_request(&mut request), Err(reason));

        let mut forged = head(
            Version::HTTP_11,
            "/",
            &[("host", "a"), ("x-secondhit-rejected", &marker)],
        );
        forged.extensions.insert(other);
        assert_eq!(
            check_request(&mut forged),
            Ok(()),
            "another connection's token"
        );
        assert!(
            !forged.headers.contains_key(REJECTION_FIELD),
            "the marker never travels on"
        );
    }
    let mut without = head(
        Version::HTTP_11,
        "/",
        &[("host", "a"), ("x-secondhit-rejected", "x")],
    );
    assert_eq!(check_request(&mut without), Ok(()));
    assert!(!without.headers.contains_key(REJECTION_FIELD));
    assert_eq!(format!("{token:?}"), "ConnectionToken(..)");
}

#[test]
fn forwarding_fields_named_in_connection_are_replaced_by_the_proxys() {
    let mut request = head(
        Version::HTTP_10,
        "/",
        &[
            ("host", "a.example"),
            ("via", "1.1 first"),
            ("x-forwarded-for", "192.0.2.1"),
            ("x-forwarded-for", "192.0.2.2"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil.example"),
            ("connection", "x-forwarded-for, via"),
        ],
    );
    forward(&mut request, IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)));
    let h = &request.headers;
    // `Connection` named the forwarding fields: the client's are gone, ours are there.
    assert_eq!(h.get(VIA).expect("via"), "1.0 secondhit");
    assert_eq!(h.get(X_FORWARDED_FOR).expect("xff"), "198.51.100.7");
    assert_eq!(h.get(X_FORWARDED_PROTO).expect("xfp"), "http");
    assert_eq!(h.get(X_FORWARDED_HOST).expect("xfh"), "a.example");
    assert!(!h.contains_key(http::header::CONNECTION));
}

#[test]
fn forwarding_fields_are_appended_to_with_the_client_unmapped_and_the_authority_as_host() {
    let mut request = head(
        Version::HTTP_2,
        "http://b.example/",
        &[
            ("via", "1.1 first"),
            ("x-forwarded-for", "192.0.2.1"),
            ("x-forwarded-for", "192.0.2.2"),
        ],
    );
    let mapped = IpAddr::V6(Ipv4Addr::new(203, 0, 113, 9).to_ipv6_mapped());
    forward(&mut request, mapped);
    let h = &request.headers;
    assert_eq!(h.get(VIA).expect("via"), "1.1 first, 2 secondhit");
    assert_eq!(
        h.get(X_FORWARDED_FOR).expect("xff"),
        "192.0.2.1, 192.0.2.2, 203.0.113.9"
    );
    assert_eq!(
        h.get(X_FORWARDED_HOST).expect("xfh from :authority"),
        "b.example"
    );
}

#[test]
fn forwarding_fields_set_no_host_for_a_request_without_one() {
    let mut request = head(
        Version::HTTP_10,
        "/",
        &[("x-forwarded-host", "evil.example")],
    );
    forward(&mut request, IpAddr::V6(Ipv6Addr::LOCALHOST));
    assert_eq!(request.headers.get(X_FORWARDED_FOR).expect("xff"), "::1");
    assert!(
        !request.headers.contains_key(X_FORWARDED_HOST),
        "no host: none forwarded"
    );
}

#[test]
fn forwarding_fields_set_https_over_the_tls_listener_whatever_the_client_claimed() {
    // Over the TLS listener the scheme is https, whatever the client claimed.
    let mut request = head(
        Version::HTTP_11,
        "/",
        &[("host", "a.example"), ("x-forwarded-proto", "http")],
    );
    forward_over(
        &mut request,
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        ClientScheme::Https,
    );
    assert_eq!(
        request.headers.get(X_FORWARDED_PROTO).expect("xfp"),
        "https"
    );
}

/// The `Forwarded` a request from `client` over `scheme` with `headers` reaches the
/// origin with.
fn forwarded_after(headers: &[(&str, &str)], client: IpAddr, scheme: ClientScheme) -> String {
    let mut request = head(Version::HTTP_11, "/", headers);
    forward_over(&mut request, client, scheme);
    let lines: Vec<_> = request.headers.get_all(FORWARDED).iter().collect();
    assert_eq!(lines.len(), 1, "one field line: {lines:?}");
    lines[0].to_str().expect("ASCII").to_owned()
}

#[test]
fn forwarded_keeps_earlier_hops_and_appends_this_one_with_its_own_host_and_proto() {
    let v4 = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
    // The client's host and proto are dropped, whatever their case; for and by are kept.
    assert_eq!(
        forwarded_after(
            &[
                ("host", "shop.example"),
                ("forwarded", "host=evil.example;proto=https"),
                (
                    "forwarded",
                    "for=192.0.2.60;Proto=https;by=203.0.113.43, ,for=\"[2001:db8:cafe::17]:4711\";HOST=x",
                ),
            ],
            v4,
            ClientScheme::Http,
        ),
        "for=192.0.2.60;by=203.0.113.43, for=\"[2001:db8:cafe::17]:4711\", \
         for=198.51.100.7;host=shop.example;proto=http"
    );
    // Without one: this hop's element alone. A host with a port is quoted, an IPv6 client
    // bracketed and quoted, an IPv4-mapped one written as IPv4.
    assert_eq!(
        forwarded_after(
            &[("host", "shop.example:8080")],
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
            ClientScheme::Https,
        ),
        "for=\"[2001:db8::1]\";host=\"shop.example:8080\";proto=https"
    );
    let mapped = IpAddr::V6(Ipv4Addr::new(203, 0, 113, 9).to_ipv6_mapped());
    assert_eq!(
        forwarded_after(&[("host", "[::1]")], mapped, ClientScheme::Http),
        "for=203.0.113.9;host=\"[::1]\";proto=http"
    );
    // No host named (HTTP/1.0 without Host): no host parameter.
    let mut request = head(Version::HTTP_10, "/", &[]);
    forward(&mut request, v4);
    assert_eq!(
        request.headers.get(FORWARDED).expect("forwarded"),
        "for=198.51.100.7;proto=http"
    );
}

#[test]
fn each_request_gets_its_own_clients_host_and_scheme_after_another_ones() {
    // One thread forwards these in turn, as a worker does; each differs from the one
    // before in one thing only, and the values formatted for the last must not be reused.
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let b = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    let turns = [
        (
            a,
            "one.example",
            ClientScheme::Http,
            "for=192.0.2.1;host=one.example;proto=http",
        ),
        (
            a,
            "one.example",
            ClientScheme::Http,
            "for=192.0.2.1;host=one.example;proto=http",
        ),
        (
            b,
            "one.example",
            ClientScheme::Http,
            "for=192.0.2.2;host=one.example;proto=http",
        ),
        (
            b,
            "two.example",
            ClientScheme::Http,
            "for=192.0.2.2;host=two.example;proto=http",
        ),
        (
            b,
            "two.example",
            ClientScheme::Https,
            "for=192.0.2.2;host=two.example;proto=https",
        ),
        (
            a,
            "two.example",
            ClientScheme::Https,
            "for=192.0.2.1;host=two.example;proto=https",
        ),
    ];
    for (client, host, scheme, expected) in turns {
        let mut request = head(Version::HTTP_11, "/", &[("host", host)]);
        forward_over(&mut request, client, scheme);
        let field = |name| {
            request
                .headers
                .get(name)
                .expect("set")
                .to_str()
                .expect("ASCII")
        };
        assert_eq!(field(FORWARDED), expected);
        assert_eq!(field(X_FORWARDED_FOR), client.to_string());
        assert_eq!(field(X_FORWARDED_HOST), host);
        assert_eq!(field(X_FORWARDED_PROTO), scheme.as_str());
    }
}

#[test]
fn each_request_gets_the_via_of_its_own_protocol_after_another_ones() {
    // The same client, host and scheme in turn: only the protocol differs, and the lines
    // encoded for the one before must not be reused.
    let client = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    for (version, via) in [
        (Version::HTTP_10, "1.0 secondhit"),
        (Version::HTTP_11, "1.1 secondhit"),
        (Version::HTTP_11, "1.1 secondhit"),
        (Version::HTTP_10, "1.0 secondhit"),
    ] {
        let mut request = head(version, "/", &[("host", "one.example")]);
        forward(&mut request, client);
        let sent: Vec<_> = request.headers.get_all(VIA).iter().collect();
        assert_eq!(sent, [via], "{version:?}");
    }
}

#[test]
fn a_forwarded_value_that_does_not_parse_is_replaced_by_this_hops_element() {
    let v4 = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
    let own = "for=198.51.100.7;host=a.example;proto=http";
    for bad in [
        "for=192.0.2.1; proto=https",
        "for=192.0.2.1;for=192.0.2.2",
        "for=\"[2001:db8::1]",
        "for",
        "for=a b",
        "=192.0.2.1",
        "for=\"a\"b",
    ] {
        let headers = [
            ("host", "a.example"),
            ("forwarded", "for=192.0.2.9"),
            ("forwarded", bad),
        ];
        assert_eq!(
            forwarded_after(&headers, v4, ClientScheme::Http),
            own,
            "{bad:?}"
        );
    }
    // Empty pairs and elements are allowed, quoted values may hold ';', ',' and escapes.
    assert_eq!(
        forwarded_after(
            &[
                ("host", "a.example"),
                ("forwarded", ";for=\"x;y,\\\"z\";;,"),
            ],
            v4,
            ClientScheme::Http,
        ),
        format!("for=\"x;y,\\\"z\", {own}")
    );
}

#[test]
fn responses_get_via_appended() {
    let mut headers = HeaderMap::new();
    add_response_via(&mut headers);
    assert_eq!(headers.get(VIA).expect("via"), "1.1 secondhit");
    add_response_via(&mut headers);
    assert_eq!(headers.get_all(VIA).iter().count(), 1);
    assert_eq!(
        headers.get(VIA).expect("via"),
        "1.1 secondhit, 1.1 secondhit"
    );
}

#[test]
fn stripped_fields_go_however_dashes_and_underscores_are_spelled() {
    let mut headers = HeaderMap::new();
    for name in [
        "x-original-url",
        "x_original_url",
        "x-original_url",
        "x-original-urls",
        "x-forwarded_prefix",
        "accept",
    ] {
        headers.append(HeaderName::from_static(name), HeaderValue::from_static("1"));
    }
    let names = [
        HeaderName::from_static("x-original-url"),
        HeaderName::from_static("x_forwarded-prefix"),
    ];
    let stripped = Stripped::of(&names);
    let mut kept: Vec<&str> = (headers.keys())
        .filter(|name| !stripped.strips(name))
        .map(HeaderName::as_str)
        .collect();
    kept.sort_unstable();
    assert_eq!(kept, ["accept", "x-original-urls"]);
}

#[test]
fn a_list_is_taken_as_one_value_of_all_its_lines_in_order() {
    let mut headers = HeaderMap::new();
    assert_eq!(take_list(&mut headers, &X_FORWARDED_FOR), None);
    headers.append(X_FORWARDED_FOR, HeaderValue::from_static("192.0.2.1"));
    assert_eq!(
        take_list(&mut headers, &X_FORWARDED_FOR),
        Some(HeaderValue::from_static("192.0.2.1"))
    );
    for line in ["192.0.2.1", "198.51.100.2, 10.0.0.1", "10.0.0.2"] {
        headers.append(X_FORWARDED_FOR, HeaderValue::from_static(line));
    }
    assert_eq!(
        take_list(&mut headers, &X_FORWARDED_FOR),
        Some(HeaderValue::from_static(
            "192.0.2.1, 198.51.100.2, 10.0.0.1, 10.0.0.2"
        ))
    );
    assert!(
        !headers.contains_key(X_FORWARDED_FOR),
        "every line is taken"
    );
}
