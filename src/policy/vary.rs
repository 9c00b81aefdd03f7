//! Vary (RFC 9111 §4.1): which request fields select among stored variants of a URL.
//!
//! Variants of one URL are stored side by side, each under the URL's key extended by
//! a *selector*: an xxh3-128 of the normalised values of the fields the response named
//! in `Vary` (hashed so that a varied `Cookie` never reaches the disk and keys stay
//! short). Normalisation makes equivalent requests share a variant: values of a field
//! are joined with commas, trimmed, inner whitespace collapsed and lower-cased;
//! `Accept-Language` is also written without whitespace and with its weights in one
//! spelling (`en-US; Q=1.0, fr;q=0.50` is `en-us,fr;q=0.5`); and `Accept-Encoding` is
//! reduced to the set of acceptable codings among `br`, `gzip` and `zstd` (at most 8
//! variants however many spellings clients invent). `Vary: *` never
//! matches, so such a response is never stored.

use http::header::{ACCEPT_ENCODING, ACCEPT_LANGUAGE};
use http::{HeaderMap, HeaderName, header::VARY};
use xxhash_rust::xxh3::xxh3_128;

/// The fields a response varies on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VarySpec {
    /// No `Vary`: one response for every request.
    None,
    /// `Vary: *`: no stored response can ever be selected.
    Star,
    /// The named fields, lower-cased, sorted, without duplicates.
    Fields(Vec<HeaderName>),
}

impl VarySpec {
    /// Reads every `Vary` field of a response.
    pub fn of(headers: &HeaderMap) -> VarySpec {
        let mut fields = Vec::new();
        for value in headers.get_all(VARY) {
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
    pub fn to_field_value(&self) -> String {
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
pub fn selector(fields: &[HeaderName], request: &HeaderMap) -> u128 {
    let mut canonical = String::new();
    for name in fields {
        canonical.push_str(name.as_str());
        canonical.push(':');
        let present = request.contains_key(name);
        if name == ACCEPT_ENCODING {
            canonical.push_str(&accept_encoding(request));
        } else if present && name == ACCEPT_LANGUAGE {
            canonical.push_str(&accept_language(&normalise(request, name)));
        } else if present {
            canonical.push_str(&normalise(request, name));
        } else {
            // Absent differs from present-but-empty.
            canonical.push('\u{0}');
        }
        canonical.push('\n');
    }
    xxh3_128(canonical.as_bytes())
}

/// All values of `name`, joined, with whitespace collapsed and lower-cased.
fn normalise(request: &HeaderMap, name: &HeaderName) -> String {
    let joined = request
        .get_all(name)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect::<Vec<_>>()
        .join(",");
    joined
        .split(',')
        .map(|item| item.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|item| !item.is_empty())
        .collect::<Vec<_>>()
        .join(",")
        .to_ascii_lowercase()
}

/// `Accept-Language` as [`normalise`]d, further canonicalised within what RFC 9110 makes
/// equivalent: no whitespace around `;` and `=` (§5.6.6), the weight's `q` in lower case
/// (§12.4.2), `q=1` (the default) left out, and a qvalue without trailing zeros
/// (`0.50` is `0.5`). Ranges keep their order: an origin may prefer the first of equal
/// weights. A weight that is not a qvalue is kept as written.
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

/// The codings this cache distinguishes in `Accept-Encoding`.
const CODINGS: [&str; 3] = ["br", "gzip", "zstd"];

/// The acceptable codings among [`CODINGS`], sorted (RFC 9110 §12.5.3: `q=0` refuses,
/// `*` accepts any coding not listed). Absent or none acceptable: `identity`.
fn accept_encoding(request: &HeaderMap) -> String {
    let mut listed: Vec<(String, bool)> = Vec::new();
    for value in request.get_all(ACCEPT_ENCODING) {
        let Ok(text) = value.to_str() else { continue };
        for item in text.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            if coding.is_empty() {
                continue;
            }
            let refused = parts.any(|p| {
                let p = p.trim().to_ascii_lowercase();
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            listed.push((coding, !refused));
        }
    }
    let star = listed.iter().find(|(c, _)| c == "*").map(|(_, ok)| *ok);
    let accepted: Vec<&str> = CODINGS
        .iter()
        .copied()
        .filter(|coding| match listed.iter().find(|(c, _)| c == coding) {
            Some((_, ok)) => *ok,
            None => star.unwrap_or(false),
        })
        .collect();
    if accepted.is_empty() {
        "identity".to_owned()
    } else {
        accepted.join(",")
    }
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
    fn equivalent_requests_share_a_selector() {
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
        let ae = fields("accept-encoding");
        let gzip_br = selector(&ae, &request(&[("accept-encoding", "gzip, deflate, br")]));
        for same in ["br,gzip", "gzip;q=1, br", "BR, GZIP, x-junk"] {
            assert_eq!(
                gzip_br,
                selector(&ae, &request(&[("accept-encoding", same)])),
                "{same}"
            );
        }
        let identity = selector(&ae, &request(&[]));
        assert_eq!(
            identity,
            selector(&ae, &request(&[("accept-encoding", "gzip;q=0")]))
        );
        assert_ne!(identity, gzip_br);
    }
}
