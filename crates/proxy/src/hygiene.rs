//! What a conforming intermediary checks on a request and adds to the messages it
//! forwards (RFC 9110 §7.6, RFC 9112 §3.2 and §6.3). Pure: no I/O.
//!
//! [`check_request`] rejects requests that RFC 9112 says a server must answer with 400
//! and that hyper lets through: no `Host` in HTTP/1.1, more than one `Host` field line,
//! a `Host` that is not `uri-host[:port]`, and a target authority (absolute form, or
//! HTTP/2 `:authority`) naming another host than `Host`. It also recognises requests
//! that `server`'s connection guard synthesized in place of a head whose framing was
//! unsafe (`Content-Length` with `Transfer-Encoding`, conflicting `Content-Length`s):
//! such a head carries [`REJECTION_FIELD`] with the connection's secret
//! [`ConnectionToken`] and the reason, which a client cannot forge because it never
//! sees the token.
//!
//! A request's hop-by-hop fields are removed on arrival (`origin::strip_hop_by_hop`);
//! [`Forwarding`] then appends `Via` and `X-Forwarded-For`, sets `X-Forwarded-Proto`
//! and `X-Forwarded-Host`, and appends this hop's element to `Forwarded` (RFC 7239),
//! keeping only the earlier elements' `for` and `by`, on each request sent to the origin
//! on a client's behalf.
//! [`add_response_via`] appends `Via` to every response. [`Stripped`] names the fields
//! `cache.strip_request_fields` removes, however `-` and `_` are spelled.

use std::net::IpAddr;
use std::sync::LazyLock;

use http::header::{FORWARDED, HOST, VIA};
use http::uri::{Authority, Scheme};
use http::{HeaderMap, HeaderName, HeaderValue, Version, request};

use secondhit_h1::FieldLines;

use crate::fields;
use crate::header_names::{length_bit, length_mask};
use crate::header_text::{push_ip, with_scratch};
use crate::key::ClientScheme;

/// The pseudonym this proxy uses in `Via` (RFC 9110 §7.6.3: a received-by name), as a
/// literal for `concat!` in the static `Via` values.
macro_rules! via_pseudonym {
    () => {
        "secondhit"
    };
}

/// The private field a synthesized rejection head carries: `<token> <reason>`.
pub(crate) const REJECTION_FIELD: HeaderName = HeaderName::from_static("x-secondhit-rejected");

/// `X-Forwarded-For`: the chain of client addresses, appended to.
pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
/// `X-Forwarded-Proto`: the scheme the client used, set.
pub(crate) const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
/// `X-Forwarded-Host`: the host the client asked for, set.
pub(crate) const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Why a request is answered 400 (501 for `CONNECT`) without reaching the origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// More than one `Host` field line (RFC 9112 §3.2).
    #[error("more than one Host field")]
    SeveralHosts,
    /// An HTTP/1.1 request without `Host` (RFC 9112 §3.2).
    #[error("HTTP/1.1 request without Host")]
    MissingHost,
    /// `Host` or the target's authority is not `uri-host[:port]` (RFC 9112 §3.2,
    /// RFC 9110 §4.2.4: userinfo is an error).
    #[error("invalid Host or target authority")]
    InvalidHost,
    /// The target URI's authority names another host or port than `Host`
    /// (RFC 9112 §3.2.2, RFC 9113 §8.3.1).
    #[error("target authority differs from Host")]
    HostMismatch,
    /// Both `Content-Length` and `Transfer-Encoding` (RFC 9112 §6.3, a smuggling vector).
    #[error("Content-Length together with Transfer-Encoding")]
    LengthWithTransferEncoding,
    /// Several `Content-Length` values that differ (RFC 9112 §6.3).
    #[error("conflicting Content-Length values")]
    ConflictingLength,
    /// A `Content-Length` that is not a decimal number (RFC 9110 §8.6).
    #[error("invalid Content-Length")]
    InvalidLength,
    /// A `TRACE` or `OPTIONS` request whose `Max-Forwards` is not one decimal number
    /// (RFC 9110 §7.6.2): the proxy cannot tell whether it is the last hop.
    #[error("invalid Max-Forwards")]
    InvalidMaxForwards,
    /// An asterisk-form target (`*`) with a method other than `OPTIONS`, which alone may
    /// use it (RFC 9112 §3.2.4).
    #[error("asterisk-form target with a method other than OPTIONS")]
    AsteriskForm,
    /// `CONNECT`: a reverse proxy opens no tunnels; answered 501 (see `proxy::target_form`).
    #[error("CONNECT is not supported by a reverse proxy")]
    Connect,
}

impl Rejection {
    /// Every reason, for parsing and tests.
    pub const ALL: [Rejection; 10] = [
        Rejection::SeveralHosts,
        Rejection::MissingHost,
        Rejection::InvalidHost,
        Rejection::HostMismatch,
        Rejection::LengthWithTransferEncoding,
        Rejection::ConflictingLength,
        Rejection::InvalidLength,
        Rejection::InvalidMaxForwards,
        Rejection::AsteriskForm,
        Rejection::Connect,
    ];

    /// The `Cache-Status` `detail` token (an RFC 8941 token) and log word.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::SeveralHosts => "several-hosts",
            Rejection::MissingHost => "missing-host",
            Rejection::InvalidHost => "invalid-host",
            Rejection::HostMismatch => "host-mismatch",
            Rejection::LengthWithTransferEncoding => "content-length-with-transfer-encoding",
            Rejection::ConflictingLength => "conflicting-content-length",
            Rejection::InvalidLength => "invalid-content-length",
            Rejection::InvalidMaxForwards => "invalid-max-forwards",
            Rejection::AsteriskForm => "asterisk-form",
            Rejection::Connect => "connect",
        }
    }

    /// The reason named by `word` ([`Rejection::as_str`]).
    pub fn from_word(word: &str) -> Option<Rejection> {
        Rejection::ALL.into_iter().find(|r| r.as_str() == word)
    }
}

/// A per-connection secret that marks the heads the connection guard synthesized.
///
/// It is attached to every request of its connection as an extension; a head whose
/// [`REJECTION_FIELD`] starts with the same token was written by the guard, not the client.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionToken([u8; 32]);

impl ConnectionToken {
    /// A fresh token from the operating system's random source.
    pub(crate) fn random() -> Result<ConnectionToken, getrandom::Error> {
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw)?;
        let mut hex = [0u8; 32];
        for (i, byte) in raw.iter().enumerate() {
            hex[2 * i] = HEX[usize::from(byte >> 4)];
            hex[2 * i + 1] = HEX[usize::from(byte & 0xf)];
        }
        Ok(ConnectionToken(hex))
    }

    /// The token as ASCII hex, for the synthesized head.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl std::fmt::Debug for ConnectionToken {
    // A secret: never in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConnectionToken(..)")
    }
}

/// Checks a request head before anything else sees it, and removes [`REJECTION_FIELD`].
pub(crate) fn check_request(head: &mut request::Parts) -> Result<(), Rejection> {
    // `remove` drops every line of the field, so a forged one never travels on.
    if let Some(marker) = fields::remove(&mut head.headers, &REJECTION_FIELD)
        && let Some(token) = head.extensions.get::<ConnectionToken>()
        && let Some(reason) = synthesized_rejection(&marker, token)
    {
        return Err(reason);
    }
    check_host(head)
}

/// The reason in a rejection marker written with `token`, or `None` if it was not.
fn synthesized_rejection(marker: &HeaderValue, token: &ConnectionToken) -> Option<Rejection> {
    let (sent, reason) = marker.as_bytes().split_at_checked(token.as_bytes().len())?;
    let reason = reason.strip_prefix(b" ")?;
    // Not a constant-time comparison: the client never sees a token, and each
    // connection has a new one, so timing reveals nothing it could reuse.
    if sent != token.as_bytes() {
        return None;
    }
    Rejection::from_word(std::str::from_utf8(reason).ok()?)
}

/// The `Host` rules of RFC 9112 §3.2 and §3.2.2.
fn check_host(head: &request::Parts) -> Result<(), Rejection> {
    let mut hosts = fields::all(&head.headers, &HOST);
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(Rejection::SeveralHosts);
    }
    let Some(host) = host else {
        // HTTP/2 carries `:authority` instead; HTTP/1.0 may omit Host.
        return match head.version {
            Version::HTTP_11 => Err(Rejection::MissingHost),
            _ => Ok(()),
        };
    };
    let Some(target) = head.uri.authority() else {
        // The usual HTTP/1 request: origin-form target, lower-case `Host`. A `Host` already
        // in the cache key's normal form is valid without parsing it (which allocates).
        if let Ok(text) = host.to_str()
            && crate::key::is_normal_authority(text, 80)
        {
            return Ok(());
        }
        return host_authority(host.as_bytes()).map(drop);
    };
    let host = host_authority(host.as_bytes())?;
    valid_authority(target)?;
    let default_port = if head.uri.scheme() == Some(&Scheme::HTTPS) {
        443
    } else {
        80
    };
    let port = |a: &Authority| a.port_u16().unwrap_or(default_port);
    if target.host().eq_ignore_ascii_case(host.host()) && port(target) == port(&host) {
        Ok(())
    } else {
        Err(Rejection::HostMismatch)
    }
}

/// Parses a `Host` value as `uri-host [":" port]`.
fn host_authority(value: &[u8]) -> Result<Authority, Rejection> {
    // An empty Host leaves an `http` URI without a host, which RFC 9110 §4.2.1
    // says a recipient must reject.
    let authority = Authority::try_from(value).map_err(|_| Rejection::InvalidHost)?;
    valid_authority(&authority)?;
    Ok(authority)
}

/// Rejects userinfo, an empty host and a port that is not a 16-bit decimal number.
fn valid_authority(authority: &Authority) -> Result<(), Rejection> {
    let text = authority.as_str();
    if text.contains('@') || authority.host().is_empty() {
        return Err(Rejection::InvalidHost);
    }
    // Without userinfo the text is the host, then nothing or ":" and the port
    // (`Authority::port` hides a port that is not a number).
    let port = text
        .strip_prefix(authority.host())
        .ok_or(Rejection::InvalidHost)?;
    match port.strip_prefix(':') {
        None if port.is_empty() => Ok(()),
        // An empty port means the default (RFC 3986 §3.2.3).
        Some(digits)
            if digits.bytes().all(|b| b.is_ascii_digit())
                && (digits.is_empty() || digits.parse::<u16>().is_ok()) =>
        {
            Ok(())
        }
        _ => Err(Rejection::InvalidHost),
    }
}

/// The client connection a request came from — its address and the listener's scheme —
/// passed with the request's head to wherever it is forwarded, for [`Forwarding::of`].
/// Passed, not attached to the head's extensions: the first extension of a request
/// allocates its map, its table and the value's box, and a hit, which forwards nothing,
/// would pay for them too (`benches/RESULTS.md`, "client connection beside the head").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClientConnection {
    /// The client's address.
    pub ip: IpAddr,
    /// `https` when it came in on the TLS listener.
    pub scheme: ClientScheme,
}

/// The fields a request gets when it is forwarded to the origin: `Via` and
/// `X-Forwarded-For` appended, `X-Forwarded-Proto` and `X-Forwarded-Host` set, and
/// `Forwarded` rewritten as the earlier elements' `for` and `by` followed by this hop's
/// `for`, `host` and `proto` (RFC 7239 §4).
///
/// Made from the client's head only where a request leaves for the origin, never on
/// arrival: a cache hit forwards nothing, and formatting the client's address and joining
/// the lists is work it need not pay for (`benches/RESULTS.md`, "forwarding fields made
/// where a request leaves"). The cache therefore judges the request as the client
/// presented it (RFC 9111 §4.1 matches `Vary` against the presented request), with its
/// hop-by-hop fields removed on arrival.
#[derive(Clone, Debug)]
pub(crate) struct Forwarding {
    /// `<received-protocol> secondhit`.
    via: HeaderValue,
    /// The client's address.
    client: IpAddr,
    /// The scheme the client used.
    proto: ClientScheme,
    /// What the client named as host: `Host`, or the target's authority.
    host: Option<HeaderValue>,
}

impl Forwarding {
    /// The forwarding fields for the request `head` from `client`.
    pub(crate) fn of(head: &request::Parts, client: ClientConnection) -> Forwarding {
        let host = fields::first(&head.headers, &HOST).cloned().or_else(|| {
            let authority = head.uri.authority()?;
            HeaderValue::from_str(authority.as_str()).ok()
        });
        Forwarding {
            via: via_value(head.version),
            client: client.ip,
            proto: client.scheme,
            host,
        }
    }

    /// What the client named as host: its `Host`, or the target's authority.
    pub(crate) fn client_host(&self) -> Option<&HeaderValue> {
        self.host.as_ref()
    }

    /// The forwarding fields of a request to the origin for the client's `headers`
    /// (hop-by-hop fields already removed, so a client cannot name ours in `Connection` to
    /// have them stripped), as lines to write after the client's other fields (its lines
    /// of these are left out: [`is_forwarding_field`]). They extend the client's (`Via`,
    /// `X-Forwarded-For`, `Forwarded`) or replace them (`X-Forwarded-*`); for the many
    /// requests that carry none, they are the lines of the thread's last request, encoded
    /// once (`benches/RESULTS.md`, "forwarding fields as lines").
    pub(crate) fn lines(&self, headers: &HeaderMap) -> FieldLines {
        if !headers.keys().any(is_forwarding_field) {
            return self.with_own_values(|own| own.lines.clone());
        }
        let (client_text, element) =
            self.with_own_values(|own| (own.client_text.clone(), own.element.clone()));
        let via = appended(headers, &VIA, &self.via);
        let forwarded_for = appended(headers, &X_FORWARDED_FOR, &client_text);
        let forwarded = forwarded_value(headers, element);
        self.encode(&via, &forwarded_for, &forwarded)
    }

    /// The lines of `via`, `forwarded_for`, this hop's `X-Forwarded-Proto` and
    /// `X-Forwarded-Host` (none when the client named no host), and `forwarded`.
    fn encode(
        &self,
        via: &HeaderValue,
        forwarded_for: &HeaderValue,
        forwarded: &HeaderValue,
    ) -> FieldLines {
        let [via_name, for_name, proto_name, host_name, forwarded_name] = &FORWARDING_FIELDS;
        let proto = HeaderValue::from_static(self.proto.as_str());
        let host = (self.host.as_ref()).map(|host| (host_name, host));
        let lines = [
            (via_name, via),
            (for_name, forwarded_for),
            (proto_name, &proto),
        ];
        FieldLines::new(
            lines
                .into_iter()
                .chain(host)
                .chain([(forwarded_name, forwarded)]),
        )
    }

    /// `read` of this hop's own values: those of the thread's last request when it came
    /// from the same client for the same host, scheme and protocol (the next request on a
    /// keep-alive connection), else formatted anew.
    fn with_own_values<T>(&self, read: impl FnOnce(&OwnValues) -> T) -> T {
        LAST_OWN_VALUES.with(|last| {
            let Ok(mut last) = last.try_borrow_mut() else {
                return read(&self.format_own_values());
            };
            if let Some((forwarding, values)) = last.as_ref()
                && (forwarding.client, forwarding.proto) == (self.client, self.proto)
                && forwarding.host == self.host
                && forwarding.via == self.via
            {
                return read(values);
            }
            let (_, values) = last.insert((self.clone(), self.format_own_values()));
            read(values)
        })
    }

    /// This hop's own values ([`OwnValues`]), formatted.
    fn format_own_values(&self) -> OwnValues {
        // An IPv4 client on a dual-stack socket appears as ::ffff:a.b.c.d.
        let client = self.client.to_canonical();
        with_scratch(|text| {
            push_ip(text, client);
            let client_len = text.len();
            self.write_forwarded_element(text, client, client_len);
            // An address and an element of tokens and quoted strings are valid values.
            let client_text = HeaderValue::from_str(&text[..client_len])
                .unwrap_or_else(|_| HeaderValue::from_static("unknown"));
            let element = HeaderValue::from_str(&text[client_len..])
                .unwrap_or_else(|_| HeaderValue::from_static("for=unknown"));
            OwnValues {
                lines: self.encode(&self.via, &client_text, &element),
                client_text,
                element,
            }
        })
    }

    /// Writes this hop's `Forwarded` element to `out`: `for=<client>;host=<host>;proto=<scheme>`,
    /// `host` left out when the client named none. `out` begins with `client` as text,
    /// `client_len` bytes.
    fn write_forwarded_element(&self, out: &mut String, client: IpAddr, client_len: usize) {
        // An IPv6 address is bracketed and, as ':' is no token character, quoted (§6).
        let (open, close) = match client {
            IpAddr::V4(_) => ("for=", ""),
            IpAddr::V6(_) => ("for=\"[", "]\""),
        };
        out.push_str(open);
        out.extend_from_within(..client_len);
        out.push_str(close);
        if let Some(host) = (self.host.as_ref()).and_then(|host| host.to_str().ok()) {
            out.push_str(";host=");
            push_forwarded_value(out, host);
        }
        out.push_str(";proto=");
        out.push_str(self.proto.as_str());
    }
}

/// This hop's own forwarding values, formatted once for a run of requests from one client.
struct OwnValues {
    /// The client's address, appended to `X-Forwarded-For`.
    client_text: HeaderValue,
    /// This hop's `Forwarded` element.
    element: HeaderValue,
    /// The lines of a request that carries no forwarding fields of its own.
    lines: FieldLines,
}

thread_local! {
    /// The last request's forwarding and its own values, on this thread.
    static LAST_OWN_VALUES: std::cell::RefCell<Option<(Forwarding, OwnValues)>> =
        const { std::cell::RefCell::new(None) };
}

/// The `Forwarded` (RFC 7239 §4) to send for a request with `headers`, treated as
/// `X-Forwarded-*` are: the chain of earlier hops (their `for` and `by`) kept and this
/// hop's `element` appended, while the client's `host`, `proto` and other parameters
/// are dropped, since nothing vouches for them and an origin would read them as this
/// hop's. A value that is not a valid `Forwarded` is replaced by this hop's element
/// alone.
fn forwarded_value(headers: &HeaderMap, element: HeaderValue) -> HeaderValue {
    match earlier_forwarded_hops(headers) {
        Some(earlier) if !earlier.is_empty() => with_scratch(|value| {
            for hop in &earlier {
                value.push_str(hop);
                value.push_str(", ");
            }
            value.push_str(element.to_str().unwrap_or_default());
            // The kept pairs were valid in a field value, and ours are tokens or quoted
            // strings: the join is a valid value; should it not be, ours alone is sent.
            HeaderValue::from_str(value).unwrap_or(element)
        }),
        _ => element,
    }
}

/// The earlier hops of the request's `Forwarded` (RFC 7239 §4): for each element, its
/// `for` and `by` pairs as sent (an element with neither is dropped); `None` when a line
/// is not a valid `Forwarded` value (a pair that is not `token=value`, a parameter given
/// twice in one element, an unterminated quoted string, bytes that are not ASCII).
/// Whitespace is allowed only around the commas of the list (RFC 9110 §5.6.1), where
/// empty elements are skipped.
fn earlier_forwarded_hops(headers: &HeaderMap) -> Option<Vec<String>> {
    let mut hops = Vec::new();
    for line in fields::all(headers, &FORWARDED) {
        for element in split_unquoted(line.to_str().ok()?, b',')? {
            let mut names: Vec<String> = Vec::new();
            let mut kept: Vec<&str> = Vec::new();
            for pair in split_unquoted(element.trim_matches([' ', '\t']), b';')? {
                // `forwarded-element` allows empty pairs between semicolons.
                if pair.is_empty() {
                    continue;
                }
                let (name, value) = pair.split_once('=')?;
                if !is_token(name) || !(is_token(value) || is_quoted_string(value)) {
                    return None;
                }
                let name = name.to_ascii_lowercase();
                if names.contains(&name) {
                    return None;
                }
                if name == "for" || name == "by" {
                    kept.push(pair);
                }
                names.push(name);
            }
            if !kept.is_empty() {
                hops.push(kept.join(";"));
            }
        }
    }
    Some(hops)
}

/// `text` split at each `separator` outside a quoted string; `None` when a quoted string
/// is left open.
fn split_unquoted(text: &str, separator: u8) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (at, byte) in text.bytes().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            _ if byte == separator && !quoted => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    if quoted {
        return None;
    }
    parts.push(&text[start..]);
    Some(parts)
}

/// True if `text` is a token (RFC 9110 §5.6.2).
fn is_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| TCHAR[usize::from(b)])
}

/// The token characters (RFC 9110 §5.6.2) by value: one load a byte, as every forwarded
/// request's host is checked.
static TCHAR: [bool; 256] = {
    let mut tchar = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        tchar[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    tchar
};

/// True if `text` is one quoted string (RFC 9110 §5.6.4), its closing quote unescaped.
fn is_quoted_string(text: &str) -> bool {
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return false;
    };
    let mut bytes = inner.bytes();
    while let Some(byte) = bytes.next() {
        let valid = match byte {
            // A quoted-pair: the escaped byte may be anything visible, or a space or tab.
            b'\\' => bytes
                .next()
                .is_some_and(|b| b == b'\t' || b >= b' ' && b != 0x7f),
            b'"' => false,
            b'\t' => true,
            _ => byte >= b' ' && byte != 0x7f,
        };
        if !valid {
            return false;
        }
    }
    true
}

/// Appends `text` to `out` as a `Forwarded` value (RFC 7239 §4): a token when it is one,
/// else quoted, as a host with a port must be (':' is no token character).
fn push_forwarded_value(out: &mut String, text: &str) {
    if is_token(text) {
        out.push_str(text);
        return;
    }
    out.push('"');
    // The usual host (`name:port`) has nothing to escape: pushed whole.
    if !text.bytes().any(|b| b == b'"' || b == b'\\') {
        out.push_str(text);
        out.push('"');
        return;
    }
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// The fields a list of names removes from requests, however their `-` and `_` are
/// spelled: CGI, PHP and the frameworks on them see `X_Original_URL` as `X-Original-URL`
/// (both are `HTTP_X_ORIGINAL_URL`).
pub(crate) struct Stripped<'n> {
    names: &'n [HeaderName],
    /// Their lengths ([`length_mask`]), which rule most fields out at once.
    lengths: u64,
}

impl<'n> Stripped<'n> {
    /// The fields `names` removes.
    pub(crate) fn of(names: &'n [HeaderName]) -> Stripped<'n> {
        Stripped {
            names,
            lengths: length_mask(names),
        }
    }

    /// Whether `field` is one of them.
    pub(crate) fn strips(&self, field: &HeaderName) -> bool {
        // Names are lower case in a `HeaderMap`, so bytes compare but for `-` against `_`.
        let same = |name: &HeaderName| {
            let (field, name) = (field.as_str().as_bytes(), name.as_str().as_bytes());
            field.len() == name.len()
                && (field.iter().zip(name))
                    .all(|(a, b)| a == b || (b"-_".contains(a) && b"-_".contains(b)))
        };
        self.lengths & length_bit(field) != 0 && self.names.iter().any(same)
    }
}

/// Appends this proxy to a response's `Via`.
///
/// The received protocol is the origin's: the origin client always speaks HTTP/1.1
/// (and `origin` does not keep the version of the response it got), so it is "1.1".
pub(crate) fn add_response_via(headers: &mut HeaderMap) {
    append_to_list(headers, VIA, via_value(Version::HTTP_11));
}

/// `<received-protocol> secondhit` for a message received with `version`.
///
/// Static values: this runs twice per request (request and response), and a static
/// `HeaderValue` costs no allocation.
fn via_value(version: Version) -> HeaderValue {
    macro_rules! via {
        ($protocol:literal) => {
            HeaderValue::from_static(concat!($protocol, " ", via_pseudonym!()))
        };
    }
    match version {
        Version::HTTP_09 => via!("0.9"),
        Version::HTTP_10 => via!("1.0"),
        Version::HTTP_2 => via!("2"),
        Version::HTTP_3 => via!("3"),
        _ => via!("1.1"),
    }
}

/// Appends `member` to the comma-separated list `name` in place, folding every existing
/// field line into one, as [`appended`] does for a request's lists.
fn append_to_list(headers: &mut HeaderMap, name: HeaderName, member: HeaderValue) {
    // One hashed lookup: most requests carry none of these lists yet.
    let mut lines = match headers.entry(name) {
        http::header::Entry::Vacant(vacant) => {
            vacant.insert(member);
            return;
        }
        http::header::Entry::Occupied(lines) => lines,
    };
    let joined = joined((lines.iter().map(HeaderValue::as_bytes)).chain([member.as_bytes()]));
    // Existing values were valid field values and so is `member`, so the join is one
    // too; should that ever fail, the old lines are kept and ours added.
    match joined {
        Some(value) => {
            lines.insert(value);
        }
        None => lines.append(member),
    }
}

/// The forwarding fields, in the order [`Forwarding::lines`] writes them: a request to
/// the origin carries the client's lines of these only as extended or replaced there.
static FORWARDING_FIELDS: [HeaderName; 5] = [
    VIA,
    X_FORWARDED_FOR,
    X_FORWARDED_PROTO,
    X_FORWARDED_HOST,
    FORWARDED,
];

/// Whether `name` is one of the forwarding fields, which a request to the origin carries
/// as [`Forwarding::lines`] writes them, not as the client sent them.
pub(crate) fn is_forwarding_field(name: &HeaderName) -> bool {
    static LENGTHS: LazyLock<u64> = LazyLock::new(|| length_mask(&FORWARDING_FIELDS));
    *LENGTHS & length_bit(name) != 0 && FORWARDING_FIELDS.contains(name)
}

/// `member` appended to the comma-separated list `name` of `headers`: all its lines
/// folded into one value (RFC 9110 §5.3 makes that equivalent), because some consumers
/// of `X-Forwarded-For` read only the first line.
fn appended(headers: &HeaderMap, name: &HeaderName, member: &HeaderValue) -> HeaderValue {
    let lines = fields::all(headers, name).map(HeaderValue::as_bytes);
    // Valid lines and a valid member join into a valid value; should that ever fail,
    // ours alone is sent.
    joined(lines.chain([member.as_bytes()])).unwrap_or_else(|| member.clone())
}

/// Removes every line of the list `name` from `headers` and returns them as one value,
/// joined with `, ` in order (RFC 9110 §5.3): a proxy in front may have added a line of
/// its own (HAProxy's `option forwardfor`) rather than extended the client's. `None`
/// when there is none, or (never for valid lines) when the join is no valid value.
pub(crate) fn take_list(headers: &mut HeaderMap, name: &HeaderName) -> Option<HeaderValue> {
    if fields::all(headers, name).nth(1).is_none() {
        // One line or none, the usual case: moved out, not copied.
        return fields::remove(headers, name);
    }
    let value = joined(headers.get_all(name).iter().map(HeaderValue::as_bytes));
    headers.remove(name);
    value
}

/// `lines` joined with `, ` into one field value, if that is a valid one.
fn joined<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Option<HeaderValue> {
    let mut value = Vec::with_capacity(64);
    for line in lines {
        if !value.is_empty() {
            value.extend_from_slice(b", ");
        }
        value.extend_from_slice(line);
    }
    HeaderValue::from_bytes(&value).ok()
}

#[cfg(test)]
mod tests;
