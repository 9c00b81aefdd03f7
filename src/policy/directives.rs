//! `Cache-Control` directives (RFC 9111 §5.2), parsed once per message.
//!
//! Directive names are case-insensitive; a value may be a token or a quoted string
//! (`max-age=5` and `max-age="5"` mean the same, §5.2). Commas inside a quoted value
//! (`no-cache="set-cookie, foo"`) do not split directives.

use http::HeaderMap;
use http::header::CACHE_CONTROL;

/// The largest delta-seconds a cache must represent; larger values and overflows
/// become this (RFC 9111 §1.2.2).
pub const MAX_DELTA_SECONDS: u64 = 2_147_483_648;

/// The value of a directive that takes delta-seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seconds {
    /// A valid number of seconds (capped at [`MAX_DELTA_SECONDS`]).
    Valid(u64),
    /// Present but not a non-negative integer, or given twice with different values:
    /// freshness information the RFC says to treat as stale (§4.2.1).
    Invalid,
}

/// The directives of every `Cache-Control` field of one message, in order.
#[derive(Clone, Debug, Default)]
pub struct Directives {
    /// Lower-cased name and unquoted value of each directive.
    list: Vec<(String, Option<String>)>,
}

impl Directives {
    /// Parses all `Cache-Control` fields of `headers`; unreadable fields are skipped.
    pub fn parse(headers: &HeaderMap) -> Directives {
        let mut list = Vec::new();
        for value in headers.get_all(CACHE_CONTROL) {
            if let Ok(text) = value.to_str() {
                split_directives(text, &mut list);
            }
        }
        Directives { list }
    }

    /// True if no `Cache-Control` directive was present.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// True if the directive `name` (lower-case) is present, with or without a value.
    pub fn has(&self, name: &str) -> bool {
        self.list.iter().any(|(n, _)| n == name)
    }

    /// The delta-seconds value of `name`, `None` when absent. A directive present
    /// without a value counts as `Invalid` (`max-age` needs one).
    pub fn seconds(&self, name: &str) -> Option<Seconds> {
        let mut found: Option<Seconds> = None;
        for (_, value) in self.list.iter().filter(|(n, _)| n == name) {
            let parsed = value
                .as_deref()
                .map_or(Seconds::Invalid, parse_delta_seconds);
            found = match found {
                None => Some(parsed),
                Some(previous) if previous == parsed => Some(previous),
                // Two different values for one directive: invalid (RFC 9111 §4.2.1).
                Some(_) => Some(Seconds::Invalid),
            };
        }
        found
    }

    /// Like [`Directives::seconds`], for directives whose value is optional
    /// (`max-stale`): `Some(None)` when present without a value.
    pub fn optional_seconds(&self, name: &str) -> Option<Option<Seconds>> {
        let (_, value) = self.list.iter().find(|(n, _)| n == name)?;
        Some(value.as_deref().map(parse_delta_seconds))
    }
}

/// Parses delta-seconds: one or more ASCII digits, capped at [`MAX_DELTA_SECONDS`].
fn parse_delta_seconds(text: &str) -> Seconds {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Seconds::Invalid;
    }
    // All digits: a parse failure can only be an overflow.
    Seconds::Valid(
        text.parse::<u64>()
            .map_or(MAX_DELTA_SECONDS, |v| v.min(MAX_DELTA_SECONDS)),
    )
}

/// Splits one field value into directives, honouring quoted strings.
fn split_directives(text: &str, out: &mut Vec<(String, Option<String>)>) {
    let mut rest = text;
    while !rest.is_empty() {
        let (item, tail) = next_item(rest);
        rest = tail;
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (name, value) = match item.split_once('=') {
            Some((name, value)) => (name.trim(), Some(unquote(value.trim()))),
            None => (item, None),
        };
        if !name.is_empty() {
            out.push((name.to_ascii_lowercase(), value));
        }
    }
}

/// The text up to the first comma outside quotes, and what follows that comma.
fn next_item(text: &str) -> (&str, &str) {
    let mut quoted = false;
    let mut escaped = false;
    for (at, byte) in text.bytes().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => return (&text[..at], &text[at + 1..]),
            _ => {}
        }
    }
    (text, "")
}

/// Removes surrounding double quotes and backslash escapes of a quoted string.
fn unquote(value: &str) -> String {
    match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(inner) => {
            let mut out = String::with_capacity(inner.len());
            let mut escaped = false;
            for c in inner.chars() {
                if c == '\\' && !escaped {
                    escaped = true;
                } else {
                    out.push(c);
                    escaped = false;
                }
            }
            out
        }
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn parse(values: &[&'static str]) -> Directives {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(CACHE_CONTROL, HeaderValue::from_static(value));
        }
        Directives::parse(&headers)
    }

    #[test]
    fn names_are_case_insensitive_and_values_unquoted() {
        let cc = parse(&[
            "Public, MAX-AGE=\"60\"",
            "no-cache=\"set-cookie, x-a\", s-maxage=5",
        ]);
        assert!(cc.has("public"));
        assert_eq!(cc.seconds("max-age"), Some(Seconds::Valid(60)));
        assert_eq!(cc.seconds("s-maxage"), Some(Seconds::Valid(5)));
        assert!(cc.has("no-cache"));
        assert!(!cc.has("x-a"), "a comma inside quotes does not split");
    }

    #[test]
    fn invalid_and_conflicting_seconds_are_invalid() {
        for value in [
            "max-age=abc",
            "max-age=-1",
            "max-age=",
            "max-age",
            "max-age=1, max-age=2",
        ] {
            assert_eq!(
                parse(&[value]).seconds("max-age"),
                Some(Seconds::Invalid),
                "{value}"
            );
        }
        assert_eq!(
            parse(&["max-age=5, max-age=5"]).seconds("max-age"),
            Some(Seconds::Valid(5))
        );
        assert_eq!(
            parse(&["max-age=99999999999999999999999"]).seconds("max-age"),
            Some(Seconds::Valid(MAX_DELTA_SECONDS))
        );
        assert_eq!(
            parse(&["max-stale"]).optional_seconds("max-stale"),
            Some(None)
        );
        assert_eq!(parse(&[]).seconds("max-age"), None);
    }
}
