//! `Cache-Control` directives (RFC 9111 §5.2), parsed once per message, and the targeted
//! fields that replace them in a response (RFC 9213).
//!
//! Directive names are case-insensitive; a value may be a token or a quoted string
//! (`max-age=5` and `max-age="5"` mean the same, §5.2). Commas inside a quoted value
//! (`no-cache="set-cookie, foo"`) do not split directives.
//!
//! A targeted field (`CDN-Cache-Control`, or the operator's `cache.targeted_field`) is a
//! structured-field Dictionary (RFC 9213 §2.2, RFC 8941 §3.2) holding the same directives
//! with the same meaning. The first field of the target list (the operator's field, then
//! `CDN-Cache-Control`) with a valid, non-empty value replaces `Cache-Control` and
//! `Expires` for this cache (§2.1); one that fails to parse is ignored as if absent. A
//! member whose value has a type its directive cannot have (`max-age=1.5`,
//! `s-maxage="60"`, `no-store=3`) is ignored as if absent (§2.2: values that violate the
//! inferred types are not to be consumed), the rest of the field still applying.

use std::borrow::Cow;

use http::header::CACHE_CONTROL;
use http::{HeaderMap, HeaderName};
use smallvec::SmallVec;

use crate::fields;

/// The largest delta-seconds a cache must represent; larger values and overflows
/// become this (RFC 9111 §1.2.2).
pub(crate) const MAX_DELTA_SECONDS: u64 = 2_147_483_648;

/// The value of a directive that takes delta-seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seconds {
    /// A valid number of seconds (capped at [`MAX_DELTA_SECONDS`]).
    Valid(u64),
    /// Present but not a non-negative integer, or given twice with different values:
    /// freshness information the RFC says to treat as stale (§4.2.1).
    Invalid,
}

pub(crate) use crate::header_names::CDN_CACHE_CONTROL;

/// The directives of every `Cache-Control` field of one message, in order (or of the
/// targeted field that replaces them).
#[derive(Clone, Debug, Default)]
pub(crate) struct Directives {
    /// Lower-cased name of each directive, and its value read as delta-seconds, the only
    /// reading of a value this cache makes. Held inline up to four, and the names this
    /// cache knows are not copied: most messages carry a few of those.
    list: List,
    /// True when they came from a targeted field, which also overrides `Expires`.
    targeted: bool,
}

impl Directives {
    /// The directives that govern how this cache treats a response: those of the first
    /// valid, non-empty field of the target list (`targeted_field`, then
    /// `CDN-Cache-Control`), else those of `Cache-Control` (RFC 9213 §2.1).
    pub(crate) fn of_response(
        headers: &HeaderMap,
        targeted_field: Option<&HeaderName>,
    ) -> Directives {
        targeted_field
            .into_iter()
            .chain([&CDN_CACHE_CONTROL])
            .find_map(|name| targeted(headers, name))
            .unwrap_or_else(|| Directives::parse(headers))
    }

    /// True when the directives came from a targeted field: `Expires` does not apply.
    pub(crate) fn is_targeted(&self) -> bool {
        self.targeted
    }

    /// Parses all `Cache-Control` fields of `headers`; unreadable fields are skipped.
    pub(crate) fn parse(headers: &HeaderMap) -> Directives {
        let mut list = SmallVec::new();
        for value in fields::all(headers, &CACHE_CONTROL) {
            if let Ok(text) = value.to_str() {
                split_directives(text, &mut list);
            }
        }
        Directives {
            list,
            targeted: false,
        }
    }

    /// True if no `Cache-Control` directive was present.
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// True if the directive `name` (lower-case) is present, with or without a value.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.list.iter().any(|(n, _)| n == name)
    }

    /// The delta-seconds value of `name`, `None` when absent. A directive present
    /// without a value counts as `Invalid` (`max-age` needs one).
    pub(crate) fn seconds(&self, name: &str) -> Option<Seconds> {
        let mut found: Option<Seconds> = None;
        for (_, value) in self.list.iter().filter(|(n, _)| n == name) {
            let parsed = value.unwrap_or(Seconds::Invalid);
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
    pub(crate) fn optional_seconds(&self, name: &str) -> Option<Option<Seconds>> {
        let (_, value) = self.list.iter().find(|(n, _)| n == name)?;
        Some(*value)
    }
}

/// The directives of the targeted field `name`, if present with a valid, non-empty
/// Dictionary (RFC 9213 §2.2). Its lines are joined with commas, as RFC 8941 §4.2 combines
/// them. Each member is read as [`member_value`] says; parameters are ignored (§2.2).
fn targeted(headers: &HeaderMap, name: &HeaderName) -> Option<Directives> {
    let mut lines = fields::all(headers, name).peekable();
    lines.peek()?;
    let mut joined = Vec::new();
    for line in lines {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(line.as_bytes());
    }
    let dictionary: sfv::Dictionary = sfv::Parser::new(&joined).parse().ok()?;
    // An empty value falls through to the next field of the target list (§2.1).
    if dictionary.is_empty() {
        return None;
    }
    let list = dictionary
        .iter()
        .filter_map(|(key, member)| {
            let name = key.as_str();
            let value = member_value(name, member)?;
            Some((name_of(name), value.as_deref().map(parse_delta_seconds)))
        })
        .collect();
    Some(Directives {
        list,
        targeted: true,
    })
}

/// The value type RFC 9213 §2.2 infers for a response directive from its `Cache-Control`
/// argument syntax.
#[derive(Clone, Copy)]
enum Expected {
    /// delta-seconds: an Integer (`max-age=60`).
    Integer,
    /// No argument: Boolean true, a bare name (`no-store`).
    Flag,
    /// Optionally field names: a bare name, or the names as a String, a Token or an
    /// Inner List of them (`private="set-cookie"`).
    FlagOrFieldNames,
    /// A directive this cache does not act on: any value.
    Any,
}

/// The type `name`'s value must have, for the response directives this cache acts on.
fn expected(name: &str) -> Expected {
    match name {
        "max-age" | "s-maxage" | "stale-while-revalidate" | "stale-if-error" => Expected::Integer,
        "no-cache" | "private" => Expected::FlagOrFieldNames,
        "no-store" | "public" | "must-revalidate" | "proxy-revalidate" | "must-understand"
        | "no-transform" | "immutable" => Expected::Flag,
        _ => Expected::Any,
    }
}

/// The directive a Dictionary member stands for: `Some(None)` for a bare name (`?1`),
/// `Some(Some(text))` for a value, `None` when it counts as absent: `?0`, or a value of a
/// type its directive cannot have, which §2.2 says not to consume (reading `max-age=1.5`
/// as 1 or `s-maxage="60"` as 60 would differ from other caches). A negative Integer is of
/// the right type but not delta-seconds: invalid, so stale, as in `Cache-Control`.
fn member_value(name: &str, member: &sfv::ListEntry) -> Option<Option<String>> {
    use sfv::BareItem;
    let expected = expected(name);
    let item = match member {
        sfv::ListEntry::Item(item) => &item.bare_item,
        sfv::ListEntry::InnerList(inner) => {
            return match expected {
                Expected::FlagOrFieldNames | Expected::Any => inner
                    .items
                    .iter()
                    .map(|item| field_name(&item.bare_item, expected))
                    .collect::<Option<Vec<_>>>()
                    .map(|names| Some(names.join(", "))),
                Expected::Integer | Expected::Flag => None,
            };
        }
    };
    match (expected, item) {
        (_, BareItem::Boolean(false)) => None,
        (Expected::Integer, BareItem::Integer(n)) => Some(Some(n.to_string())),
        (Expected::Integer, _) => None,
        (_, BareItem::Boolean(true)) => Some(None),
        (Expected::Flag, _) => None,
        (Expected::FlagOrFieldNames | Expected::Any, other) => {
            field_name(other, expected).map(Some)
        }
    }
}

/// The text of a value that is not a Boolean: for field names only a String or a Token;
/// for a directive this cache does not act on, any (a Decimal, Byte Sequence, Date or
/// Display String reads as empty: nothing here looks at it).
fn field_name(item: &sfv::BareItem, expected: Expected) -> Option<String> {
    match item {
        sfv::BareItem::String(text) => Some(text.as_str().to_owned()),
        sfv::BareItem::Token(token) => Some(token.as_str().to_owned()),
        sfv::BareItem::Integer(n) if matches!(expected, Expected::Any) => Some(n.to_string()),
        _ if matches!(expected, Expected::Any) => Some(String::new()),
        _ => None,
    }
}

/// Parses delta-seconds: one or more ASCII digits, capped at [`MAX_DELTA_SECONDS`].
pub(super) fn parse_delta_seconds(text: &str) -> Seconds {
    delta_seconds(text.as_bytes())
}

/// [`parse_delta_seconds`] of bytes, in one pass.
fn delta_seconds(digits: &[u8]) -> Seconds {
    if digits.is_empty() {
        return Seconds::Invalid;
    }
    let mut n: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return Seconds::Invalid;
        }
        // Saturating: an overflow is capped like any value over the maximum.
        n = n.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    Seconds::Valid(n.min(MAX_DELTA_SECONDS))
}

/// A directive's name, lower-cased.
type Name = Cow<'static, str>;

/// Each directive's name and value as delta-seconds, inline up to four.
type List = SmallVec<[(Name, Option<Seconds>); 4]>;

/// The directives this cache acts on, and the common ones it does not.
const KNOWN: [&str; 16] = [
    "max-age",
    "s-maxage",
    "no-cache",
    "no-store",
    "private",
    "public",
    "must-revalidate",
    "proxy-revalidate",
    "must-understand",
    "no-transform",
    "immutable",
    "stale-while-revalidate",
    "stale-if-error",
    "max-stale",
    "min-fresh",
    "only-if-cached",
];

/// `name` lower-cased: one of [`KNOWN`] as it is, any other copied.
fn name_of(name: &str) -> Name {
    // Exactly first: nearly every origin sends them lower-case, and an exact comparison
    // rules most names out by length alone.
    if let Some(known) = KNOWN.iter().find(|known| **known == name) {
        return Cow::Borrowed(known);
    }
    match KNOWN.iter().find(|known| known.eq_ignore_ascii_case(name)) {
        Some(known) => Cow::Borrowed(known),
        None => Cow::Owned(name.to_ascii_lowercase()),
    }
}

/// Splits one field value into directives at each comma outside a quoted string. A
/// byte at a time, with nothing but the comma and the quote looked for outside quotes:
/// values are short, and `memchr` and `str::split` cost more on them.
fn split_directives(text: &str, out: &mut List) {
    let bytes = text.as_bytes();
    let (mut start, mut at) = (0, 0);
    while at < bytes.len() {
        match bytes[at] {
            // ASCII (the value passed `HeaderValue::to_str`): `at` is a character boundary.
            b',' => {
                push_item(&text[start..at], out);
                start = at + 1;
            }
            b'"' => at = closing_quote(bytes, at + 1),
            _ => {}
        }
        at += 1;
    }
    push_item(&text[start..], out);
}

/// Where the quoted string whose content starts at `from` ends: its closing quote, past
/// backslash escapes; the end of `bytes` when it has none.
fn closing_quote(bytes: &[u8], from: usize) -> usize {
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// Adds the directive `item`: its name, and its value (after the first `=`) read as
/// delta-seconds. An item with no name adds nothing.
fn push_item(item: &str, out: &mut List) {
    let (name, value) = match item.bytes().position(|b| b == b'=') {
        Some(at) => (&item[..at], Some(&item[at + 1..])),
        None => (item, None),
    };
    let name = name.trim_ascii();
    if !name.is_empty() {
        out.push((
            name_of(name),
            value.map(|value| value_seconds(value.trim_ascii())),
        ));
    }
}

/// A directive's value, a token or a quoted string (`max-age=5` and `max-age="5"` mean
/// the same), read as delta-seconds; copied only to remove escapes.
fn value_seconds(value: &str) -> Seconds {
    match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(inner) if !inner.contains('\\') => delta_seconds(inner.as_bytes()),
        Some(_) => parse_delta_seconds(&unquote(value)),
        None => delta_seconds(value.as_bytes()),
    }
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

    /// The split as it was first written, a reference for [`split_directives`]: items at
    /// commas outside quotes, then each trimmed and split at its first `=`.
    fn split_by_items(text: &str) -> List {
        let mut out = List::new();
        let mut rest = text;
        while !rest.is_empty() {
            let (mut quoted, mut escaped, mut end) = (false, false, rest.len());
            for (at, byte) in rest.bytes().enumerate() {
                match byte {
                    _ if escaped => escaped = false,
                    b'\\' if quoted => escaped = true,
                    b'"' => quoted = !quoted,
                    b',' if !quoted => {
                        end = at;
                        break;
                    }
                    _ => {}
                }
            }
            let item = rest[..end].trim();
            rest = rest.get(end + 1..).unwrap_or("");
            let (name, value) = match item.split_once('=') {
                Some((name, value)) => (name.trim(), Some(value_seconds(value.trim()))),
                None => (item, None),
            };
            if !name.is_empty() {
                out.push((name_of(name), value));
            }
        }
        out
    }

    proptest::proptest! {
        /// The split reads every value as the reference does, quotes, escapes, stray
        /// `=` and empty items included.
        #[test]
        fn directives_split_as_the_reference_splits_them(
            text in "[a-zA-Z0-9=,\"\\\\ \t-]{0,40}"
        ) {
            let mut one_pass = List::new();
            split_directives(&text, &mut one_pass);
            proptest::prop_assert_eq!(one_pass, split_by_items(&text));
        }
    }

    #[test]
    fn names_are_case_insensitive_and_values_unquoted() {
        let cc = parse(&[
            "Public, MAX-AGE=\"60\"",
            "no-cache=\"set-cookie, x-a\", s-maxage=5",
            "X-Other=1, Must-Revalidate, immutable",
        ]);
        assert!(cc.has("public"));
        assert!(cc.has("x-other") && cc.has("must-revalidate") && cc.has("immutable"));
        assert_eq!(cc.seconds("max-age"), Some(Seconds::Valid(60)));
        assert_eq!(cc.seconds("s-maxage"), Some(Seconds::Valid(5)));
        assert!(cc.has("no-cache"));
        assert!(!cc.has("x-a"), "a comma inside quotes does not split");
        let escaped = parse(&[r#"max-age="6\0", s-maxage="7"#]);
        assert_eq!(escaped.seconds("max-age"), Some(Seconds::Valid(60)));
        assert_eq!(
            escaped.seconds("s-maxage"),
            Some(Seconds::Invalid),
            "an unterminated quoted string is no number"
        );
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

    fn response(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn the_first_valid_targeted_field_replaces_cache_control() {
        let mine = HeaderName::from_static("x-mine-cc");
        let all = response(&[
            ("cache-control", "max-age=1"),
            ("cdn-cache-control", "max-age=2"),
            ("x-mine-cc", "max-age=3, no-cache=\"set-cookie\""),
        ]);
        let cc = Directives::of_response(&all, Some(&mine));
        assert!(cc.is_targeted());
        assert_eq!(cc.seconds("max-age"), Some(Seconds::Valid(3)));
        assert!(cc.has("no-cache"));
        let cdn = Directives::of_response(&all, None);
        assert_eq!(cdn.seconds("max-age"), Some(Seconds::Valid(2)));
        // Upper-case keys are not a valid Dictionary: the field is ignored whole.
        let invalid = response(&[
            ("cache-control", "max-age=1"),
            ("cdn-cache-control", "Max-Age=2"),
        ]);
        let fallback = Directives::of_response(&invalid, None);
        assert!(!fallback.is_targeted());
        assert_eq!(fallback.seconds("max-age"), Some(Seconds::Valid(1)));
    }

    #[test]
    fn targeted_values_follow_the_dictionary_types() {
        let cc = Directives::of_response(
            &response(&[
                ("cdn-cache-control", "no-store=?0, private=(\"a\" \"b\")"),
                ("cdn-cache-control", "max-age=-5, s-maxage=1.5;p=1, public"),
            ]),
            None,
        );
        assert!(!cc.has("no-store"), "?0 is absent");
        assert!(cc.has("private") && cc.has("public"));
        assert_eq!(cc.seconds("max-age"), Some(Seconds::Invalid), "negative");
        assert_eq!(cc.seconds("s-maxage"), None, "a Decimal is ignored");
        // An empty value is ignored; a non-empty one replaces Cache-Control whole, even
        // when it holds no directive this cache knows.
        let empty = response(&[("cache-control", "max-age=7"), ("cdn-cache-control", "")]);
        let fallback = Directives::of_response(&empty, None);
        assert_eq!(fallback.seconds("max-age"), Some(Seconds::Valid(7)));
        let unknown = response(&[("cache-control", "max-age=7"), ("cdn-cache-control", "x")]);
        let replaced = Directives::of_response(&unknown, None);
        assert!(replaced.is_targeted());
        assert_eq!(replaced.seconds("max-age"), None);
    }

    #[test]
    fn a_targeted_directive_whose_value_has_the_wrong_type_is_ignored() {
        let cc = Directives::of_response(
            &response(&[
                ("cache-control", "no-store, max-age=9"),
                (
                    "cdn-cache-control",
                    "s-maxage=\"60\", max-age=1.5, no-store=3, public=\"yes\", \
                     private=4, no-cache=(1 2), must-revalidate=(\"a\"), \
                     stale-while-revalidate=?1, stale-if-error=abc, x-ext=2.5",
                ),
            ]),
            None,
        );
        // The field is a valid Dictionary: it still replaces Cache-Control whole.
        assert!(cc.is_targeted());
        for name in [
            "s-maxage",
            "max-age",
            "stale-while-revalidate",
            "stale-if-error",
        ] {
            assert_eq!(cc.seconds(name), None, "{name} is ignored");
        }
        for name in [
            "no-store",
            "public",
            "private",
            "no-cache",
            "must-revalidate",
        ] {
            assert!(!cc.has(name), "{name} is ignored");
        }
        assert!(cc.has("x-ext"), "an unknown directive takes any value");
        // The same directives with the types they must have are honoured.
        let typed = Directives::of_response(
            &response(&[(
                "cdn-cache-control",
                "s-maxage=60, no-store, private=\"set-cookie\", no-cache=x-a, \
                 must-revalidate;p=\"ignored\"",
            )]),
            None,
        );
        assert_eq!(typed.seconds("s-maxage"), Some(Seconds::Valid(60)));
        for name in ["no-store", "private", "no-cache", "must-revalidate"] {
            assert!(typed.has(name), "{name}");
        }
    }
}
