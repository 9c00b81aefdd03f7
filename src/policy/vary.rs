//! Vary (RFC 9111 §4.1): which request fields select among stored variants of a URL.
//!
//! Variants of one URL are stored side by side, each under the URL's key extended by
//! a *selector*: an xxh3-128 of the normalised values of the fields the response named
//! in `Vary` (hashed so that a varied `Cookie` never reaches the disk and keys stay
//! short). Normalisation makes equivalent requests share a variant: values of a field
//! are joined with commas, trimmed, inner whitespace collapsed and lower-cased; and
//! `Accept-Encoding` is reduced to the set of acceptable codings among `br`, `gzip` and
//! `zstd` (at most 8 variants however many spellings clients invent). `Vary: *` never
//! matches, so such a response is never stored.

use http::header::ACCEPT_ENCODING;
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
