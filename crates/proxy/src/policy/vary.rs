//! Vary (RFC 9111 §4.1): which request fields select among stored variants of a URL.
//!
//! Variants of one URL are stored side by side, each under the URL's key extended by
//! a *selector*: an xxh3-128 of the normalised values of the fields the response named
//! in `Vary` (hashed so that a varied `Cookie` never reaches the disk and keys stay
//! short). Normalisation makes equivalent requests share a variant, and only those:
//! a field's values are compared byte for byte, line by line, unless RFC 9110 defines
//! them as case-insensitive lists. `Accept-Language` and `Accept-Charset` are such lists:
//! their members are trimmed, inner whitespace collapsed and case folded, and
//! `Accept-Language` is also written without whitespace and with its weights in one
//! spelling (`en-US; Q=1.0, fr;q=0.50` is `en-us,fr;q=0.5`). `Accept-Encoding` is
//! reduced to the set of [`CODINGS`] the request accepts, which bounds its variants
//! however many spellings clients invent, and a stored variant is served only to a
//! request that accepts its `Content-Encoding` ([`accepts_coding`]), whatever the set
//! left out. `Vary: *` never matches, so such a response is never stored.

use http::header::{ACCEPT_CHARSET, ACCEPT_ENCODING, ACCEPT_LANGUAGE, CONTENT_ENCODING};
use http::{HeaderMap, HeaderName, header::VARY};
use xxhash_rust::xxh3::xxh3_128;

/// The fields a response varies on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum VarySpec {
    /// No `Vary`: one response for every request.
    None,
    /// `Vary: *`: no stored response can ever be selected.
    Star,
    /// The named fields, lower-cased, sorted, without duplicates.
    Fields(Vec<HeaderName>),
}

impl VarySpec {
    /// Reads every `Vary` field of a response.
    pub(crate) fn of(headers: &HeaderMap) -> VarySpec {
        let mut fields = Vec::new();
        for value in crate::fields::all(headers, &VARY) {
            let Ok(text) = value.to_str() else {
                // An unreadable Vary cannot be matched: treat it like `*`.
                return VarySpec::Star;
            };
            for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                if name == "*" {
                    return VarySpec::Star;
                }
                match HeaderName::from_bytes(name.as_bytes()) {
                    Ok(name) => fields.push(name),
                    Err(_) => return VarySpec::Star,
                }
            }
        }
        if fields.is_empty() {
            return VarySpec::None;
        }
        fields.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        fields.dedup();
        VarySpec::Fields(fields)
    }

    /// The canonical `Vary` value (sorted field names), for the variant marker.
    pub(crate) fn to_field_value(&self) -> String {
        match self {
            VarySpec::None => String::new(),
            VarySpec::Star => "*".to_owned(),
            VarySpec::Fields(fields) => fields
                .iter()
                .map(HeaderName::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// The selector of `request` among variants that vary on `fields`.
///
/// The canonical text hashed is each field's name, `:`, its normal form and a newline;
/// no field value can hold a newline, a carriage return or a NUL, so the text of two
/// requests is the same only when every field's normal form is.
pub(crate) fn selector(fields: &[HeaderName], request: &HeaderMap) -> u128 {
    let mut canonical = Vec::with_capacity(64);
    for name in fields {
        canonical.extend_from_slice(name.as_str().as_bytes());
        canonical.push(b':');
        if name == ACCEPT_ENCODING {
            canonical.extend_from_slice(Accepted::of(request).codings().as_bytes());
        } else if !request.contains_key(name) {
            // Absent differs from present-but-empty.
            canonical.push(0);
        } else {
            let folded = CASE_INSENSITIVE_LISTS
                .contains(name)
                .then(|| folded_list(request, name))
                .flatten();
            match folded {
                Some(list) if name == ACCEPT_LANGUAGE => {
                    canonical.extend_from_slice(accept_language(&list).as_bytes());
                }
                Some(list) => canonical.extend_from_slice(list.as_bytes()),
                None => exact(request, name, &mut canonical),
            }
        }
        canonical.push(b'\n');
    }
    xxh3_128(&canonical)
}

/// The fields whose values RFC 9110 defines as lists of case-insensitive members
/// (language tags, §12.5.4 with RFC 4647; charset names, §8.3.2), so that requests
/// differing only in the case or spacing of those members share a variant. Every other
/// field is compared exactly: `Cookie` or a token in a custom field may be case-sensitive.
static CASE_INSENSITIVE_LISTS: [HeaderName; 2] = [ACCEPT_LANGUAGE, ACCEPT_CHARSET];

/// Every line of `name`, byte for byte, each ended by a carriage return (which no value
/// holds): lines are not joined, so nothing a client writes can equal another spelling.
fn exact(request: &HeaderMap, name: &HeaderName, out: &mut Vec<u8>) {
    for value in request.get_all(name) {
        out.extend_from_slice(value.as_bytes());
        out.push(b'\r');
    }
}

/// All lines of the list `name`, joined with commas, members trimmed, inner whitespace
/// collapsed and lower-cased; `None` when a line is not ASCII (obs-text), which is then
/// compared [`exact`]ly: folding would be a guess, and the exact form, holding a byte
/// above 0x7f, can never equal a folded one.
fn folded_list(request: &HeaderMap, name: &HeaderName) -> Option<String> {
    let mut members = Vec::new();
    for value in request.get_all(name) {
        for member in value.to_str().ok()?.split(',') {
            let member = member.split_whitespace().collect::<Vec<_>>().join(" ");
            if !member.is_empty() {
                members.push(member.to_ascii_lowercase());
            }
        }
    }
    Some(members.join(","))
}

/// `Accept-Language` as [`folded_list`] writes it, further canonicalised within what
/// RFC 9110 makes equivalent: no whitespace around `;` and `=` (§5.6.6), the weight's `q`
/// in lower case (§12.4.2), `q=1` (the default) left out, and a qvalue without trailing
/// zeros (`0.50` is `0.5`). Ranges keep their order: an origin may prefer the first of
/// equal weights. A weight that is not a qvalue is kept as written.
fn accept_language(normalised: &str) -> String {
    normalised
        .split(',')
        .map(|item| {
            let item: String = item.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            let Some((range, weight)) = item.split_once(';') else {
                return item;
            };
            match weight.strip_prefix("q=").and_then(qvalue) {
                Some("1") => range.to_owned(),
                Some(q) => format!("{range};q={q}"),
                None => item,
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A qvalue (`0`, `0.5`, `1.000`: RFC 9110 §12.4.2) without trailing zeros, if valid.
fn qvalue(text: &str) -> Option<&str> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = fraction.len() <= 3 && fraction.bytes().all(|b| b.is_ascii_digit());
    let valid = match whole {
        "0" => digits,
        "1" => digits && fraction.bytes().all(|b| b == b'0'),
        _ => false,
    };
    let shortest = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    };
    valid.then_some(shortest)
}

/// The content codings an `Accept-Encoding` selector tells apart, sorted: the registered
/// ones an origin may answer with (RFC 9110 §8.4.1 and the IANA registry's `br` and
/// `zstd`), and `identity`, so that a request refusing an uncoded answer does not share
/// the variant of those that take one. At most 64 variants per URL, and one per common
/// browser, as each sends one fixed list. Any other coding (a private one, `dcb`) is
/// left out of the selector, so requests differing only in it share a variant; a stored
/// variant coded with it still reaches only requests that accept it ([`accepts_coding`]).
const CODINGS: [&str; 6] = ["br", "compress", "deflate", "gzip", "identity", "zstd"];

/// A request's `Accept-Encoding` (RFC 9110 §12.5.3), as the codings it names and whether
/// it accepts each.
struct Accepted {
    /// Whether the request has the field at all.
    present: bool,
    /// Each named coding (lower-cased, `x-gzip` and `x-compress` as `gzip` and
    /// `compress`, §8.4.1), and whether its weight is above zero; the first of a coding
    /// named twice counts.
    listed: Vec<(String, bool)>,
}

impl Accepted {
    /// The `Accept-Encoding` of `request`, every line in order. A weight that is not a
    /// qvalue refuses its coding: an answer the client may not decode is worse than a miss.
    fn of(request: &HeaderMap) -> Accepted {
        let mut listed = Vec::new();
        let mut present = false;
        for value in crate::fields::all(request, &ACCEPT_ENCODING) {
            present = true;
            // A line that is not ASCII names no coding this cache could match.
            let Ok(text) = value.to_str() else { continue };
            for item in text.split(',') {
                let mut parts = item.split(';');
                let coding = canonical_coding(parts.next().unwrap_or(""));
                if coding.is_empty() {
                    continue;
                }
                let weight = parts.find_map(|p| {
                    let (name, value) = p.split_once('=')?;
                    name.trim().eq_ignore_ascii_case("q").then(|| value.trim())
                });
                let accepted = weight.is_none_or(|q| qvalue(q).is_some_and(|q| q != "0"));
                listed.push((coding, accepted));
            }
        }
        Accepted { present, listed }
    }

    /// Whether an answer content-coded with `coding` (canonical) is acceptable: as named,
    /// else as `*` says, else only `identity`. A request without the field accepts only
    /// `identity` here, although RFC 9110 lets a server send it any coding: a client
    /// that names none, such as a script, cannot be relied on to decode one.
    fn accepts(&self, coding: &str) -> bool {
        if !self.present {
            return coding == "identity";
        }
        let named = |name: &str| self.listed.iter().find(|(c, _)| c == name);
        match named(coding).or_else(|| named("*")) {
            Some((_, accepted)) => *accepted,
            None => coding == "identity",
        }
    }

    /// The selector's form: the [`CODINGS`] this request accepts, comma-separated.
    fn codings(&self) -> String {
        let accepted: Vec<&str> = CODINGS.into_iter().filter(|c| self.accepts(c)).collect();
        accepted.join(",")
    }
}

/// `coding` trimmed, lower-cased, with the `x-` aliases RFC 9110 §8.4.1 makes equivalent
/// written as the coding they name.
fn canonical_coding(coding: &str) -> String {
    let coding = coding.trim().to_ascii_lowercase();
    match coding.as_str() {
        "x-gzip" => "gzip".to_owned(),
        "x-compress" => "compress".to_owned(),
        _ => coding,
    }
}

/// Whether `request` accepts a stored response with headers `response`: every coding
/// its `Content-Encoding` lists is acceptable to the request's `Accept-Encoding`
/// (an uncoded response needs `identity`). This, not the selector, is what guarantees
/// that no client is served a coding it did not ask for: the selector only keeps apart
/// requests that would otherwise take turns replacing each other's variant. A
/// `Content-Encoding` that is not ASCII is acceptable to none.
pub(crate) fn accepts_coding(request: &HeaderMap, response: &HeaderMap) -> bool {
    let mut codings = Vec::new();
    for value in crate::fields::all(response, &CONTENT_ENCODING) {
        let Ok(text) = value.to_str() else {
            return false;
        };
        codings.extend(text.split(',').map(canonical_coding));
    }
    codings.retain(|c| !c.is_empty() && c != "identity");
    if codings.is_empty() {
        codings.push("identity".to_owned());
    }
    let accepted = Accepted::of(request);
    codings.iter().all(|coding| accepted.accepts(coding))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn request(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    fn fields(vary: &'static str) -> Vec<HeaderName> {
        match VarySpec::of(&request(&[("vary", vary)])) {
            VarySpec::Fields(fields) => fields,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn spec_is_sorted_deduplicated_and_star_wins() {
        assert_eq!(
            fields("Accept-Language, accept-encoding, Accept-Language").len(),
            2
        );
        assert_eq!(
            VarySpec::of(&request(&[("vary", "accept, *")])),
            VarySpec::Star
        );
        assert_eq!(VarySpec::of(&request(&[])), VarySpec::None);
    }

    #[test]
    fn equivalent_accept_language_requests_share_a_selector() {
        let lang = fields("accept-language");
        let en = selector(&lang, &request(&[("accept-language", "en")]));
        assert_eq!(
            en,
            selector(&lang, &request(&[("accept-language", "  EN ")]))
        );
        assert_ne!(en, selector(&lang, &request(&[("accept-language", "fr")])));
        assert_ne!(en, selector(&lang, &request(&[])));
        let weighted = selector(&lang, &request(&[("accept-language", "en-US, fr;q=0.5")]));
        for same in ["en-us;q=1.000 , FR; Q=0.50", "EN-US;q=1,fr ;q=0.500"] {
            assert_eq!(
                weighted,
                selector(&lang, &request(&[("accept-language", same)])),
                "{same}"
            );
        }
        let refused = selector(&lang, &request(&[("accept-language", "en, fr;q=0")]));
        let spelled = selector(&lang, &request(&[("accept-language", "en, fr;q=0.")]));
        assert_eq!(refused, spelled);
        for other in ["fr;q=0.5, en-US", "en-US, fr;q=0.6", "en-US, fr;q=0"] {
            assert_ne!(
                weighted,
                selector(&lang, &request(&[("accept-language", other)])),
                "{other}"
            );
        }
    }

    #[test]
    fn equivalent_accept_encoding_requests_share_a_selector() {
        let ae = fields("accept-encoding");
        let browser = selector(&ae, &request(&[("accept-encoding", "gzip, deflate, br")]));
        for same in [
            "br,deflate,gzip",
            "deflate;q=0.5, gzip;q=1, br",
            "BR, X-GZIP, x-junk, Deflate",
        ] {
            assert_eq!(
                browser,
                selector(&ae, &request(&[("accept-encoding", same)])),
                "{same}"
            );
        }
        for other in [
            "br, gzip",
            "gzip, deflate, br, zstd",
            "gzip, deflate;q=0, br",
        ] {
            assert_ne!(
                browser,
                selector(&ae, &request(&[("accept-encoding", other)])),
                "{other}"
            );
        }
        let identity = selector(&ae, &request(&[]));
        for same in ["gzip;q=0", "identity", "", "x-junk"] {
            assert_eq!(
                identity,
                selector(&ae, &request(&[("accept-encoding", same)])),
                "{same}"
            );
        }
        let every = selector(&ae, &request(&[("accept-encoding", "*")]));
        let listed = "br, compress, deflate, gzip, identity, zstd";
        assert_eq!(
            every,
            selector(&ae, &request(&[("accept-encoding", listed)]))
        );
        let refused = selector(&ae, &request(&[("accept-encoding", "*;q=0")]));
        assert_ne!(
            refused, identity,
            "refusing identity is a variant of its own"
        );
        assert_ne!(identity, browser);
    }

    #[test]
    fn only_case_insensitive_lists_fold_case_and_other_values_stay_exact() {
        let cookie = fields("cookie");
        let upper = selector(&cookie, &request(&[("cookie", "id=AbC")]));
        assert_ne!(upper, selector(&cookie, &request(&[("cookie", "id=abc")])));
        assert_ne!(upper, selector(&cookie, &request(&[("cookie", "id=AbC ")])));
        // Two lines are not the same as one joined: nothing is merged by guessing.
        let mode = fields("x-mode");
        let joined = selector(&mode, &request(&[("x-mode", "a,b")]));
        assert_ne!(
            joined,
            selector(&mode, &request(&[("x-mode", "a"), ("x-mode", "b")]))
        );
        assert_ne!(
            selector(&mode, &request(&[])),
            selector(&mode, &request(&[("x-mode", "")]))
        );
        let charset = fields("accept-charset");
        assert_eq!(
            selector(
                &charset,
                &request(&[("accept-charset", "UTF-8, ISO-8859-1")])
            ),
            selector(
                &charset,
                &request(&[("accept-charset", "utf-8,iso-8859-1")])
            )
        );
    }

    #[test]
    fn values_that_are_not_ascii_are_compared_exactly() {
        let headers = |name: &'static str, value: &'static [u8]| {
            let mut headers = HeaderMap::new();
            let value = HeaderValue::from_bytes(value).expect("obs-text is a valid value");
            headers.insert(name, value);
            headers
        };
        for name in ["x-token", "accept-language"] {
            let fields = [HeaderName::from_static(name)];
            assert_ne!(
                selector(&fields, &headers(name, b"\xff")),
                selector(&fields, &headers(name, b"\xfe")),
                "{name}"
            );
        }
    }

    #[test]
    fn a_coded_response_is_acceptable_only_to_requests_accepting_every_coding() {
        let coded = |coding: &'static str| request(&[("content-encoding", coding)]);
        let asks = |ae: Option<&'static str>| {
            request(
                &ae.map(|v| ("accept-encoding", v))
                    .into_iter()
                    .collect::<Vec<_>>(),
            )
        };
        let accepted = [
            (Some("gzip, deflate"), "deflate"),
            (Some("x-gzip"), "gzip"),
            (Some("gzip"), "X-GZIP"),
            (Some("*"), "x-private"),
            (Some("gzip, br"), "gzip, br"),
            (None, "identity"),
        ];
        for (ae, coding) in accepted {
            assert!(accepts_coding(&asks(ae), &coded(coding)), "{ae:?} {coding}");
        }
        let refused = [
            (None, "deflate"),
            (Some("gzip"), "deflate"),
            (Some("gzip;q=0"), "gzip"),
            (Some("gzip;q=zero"), "gzip"),
            (Some("*, deflate;q=0"), "deflate"),
            (Some("gzip"), "gzip, br"),
            (Some(""), "gzip"),
        ];
        for (ae, coding) in refused {
            assert!(
                !accepts_coding(&asks(ae), &coded(coding)),
                "{ae:?} {coding}"
            );
        }
        let uncoded = request(&[]);
        assert!(accepts_coding(&asks(Some("gzip")), &uncoded));
        assert!(!accepts_coding(&asks(Some("gzip, identity;q=0")), &uncoded));
        assert!(!accepts_coding(&asks(Some("*;q=0")), &uncoded));
    }
}
