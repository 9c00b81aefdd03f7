//! One access-log line from a [`Record`], appended to a reused buffer: nginx's `combined`
//! format with two fields more, a JSON object, or the operator's template of nginx-style
//! variables. Pure formatting, no I/O; it runs on the writer thread, never on the request
//! path, and so does working out the client behind a trusted proxy.

use std::borrow::Cow;
use std::fmt;
use std::io::Write;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use ipnet::IpNet;

use http::{HeaderValue, Version};
use serde::Serialize;

use super::Record;
use crate::config::AccessFormat;
use crate::config::access_format::{Field, Piece};

/// Formats lines, keeping the `[day/Mon/year:hh:mm:ss +0000]` text of the last second it
/// formatted: consecutive lines mostly fall in the same second.
pub(crate) struct LineFormat {
    /// `log.access_format`.
    format: AccessFormat,
    /// `log.trusted_proxies`: peers whose `X-Forwarded-For` names the client.
    trusted: Vec<IpNet>,
    /// Unix second of `clf_time`, or `None` before the first line.
    second: Option<u64>,
    /// The common-log-format time of that second.
    clf_time: String,
}

impl LineFormat {
    /// Lines in `format`, the client read from `X-Forwarded-For` behind `trusted` peers.
    pub(crate) fn new(format: AccessFormat, trusted: Vec<IpNet>) -> LineFormat {
        LineFormat {
            format,
            trusted,
            second: None,
            clf_time: String::new(),
        }
    }

    /// Appends `record` as one line (newline included) to `out`.
    pub(crate) fn append(&mut self, record: &Record, out: &mut Vec<u8>) {
        let client = self.client(record);
        match &self.format {
            AccessFormat::Combined => self.combined(record, client, out),
            AccessFormat::Json => json(record, client, out),
            AccessFormat::Template(_) => self.template(record, client, out),
        }
    }

    /// A line of the template: its text as it is, each variable's value escaped as nginx
    /// escapes them.
    fn template(&mut self, record: &Record, client: IpAddr, out: &mut Vec<u8>) {
        // Taken out while the fields borrow `self` for the time's cache.
        let format = std::mem::replace(&mut self.format, AccessFormat::Combined);
        if let AccessFormat::Template(pieces) = &format {
            for piece in pieces {
                match piece {
                    Piece::Text(text) => out.extend_from_slice(text.as_bytes()),
                    Piece::Field(field) => self.field(*field, record, client, out),
                }
            }
        }
        self.format = format;
        out.push(b'\n');
    }

    /// One variable's value; `-` for what the request does not have, as nginx writes it.
    fn field(&mut self, field: Field, record: &Record, client: IpAddr, out: &mut Vec<u8>) {
        let upstream = record.upstream.as_ref();
        // Writes into a Vec cannot fail.
        match field {
            Field::RemoteAddr => drop(write!(out, "{client}")),
            Field::RealipRemoteAddr => drop(write!(out, "{}", record.peer)),
            Field::Host => match &record.host {
                Some(host) => escaped(without_port(host.as_bytes()), out),
                None => out.push(b'-'),
            },
            Field::Request => {
                escaped(record.method.as_str().as_bytes(), out);
                out.push(b' ');
                target(record, |bytes| escaped(bytes, out));
                out.push(b' ');
                out.extend_from_slice(protocol(record.version).as_bytes());
            }
            Field::RequestMethod => escaped(record.method.as_str().as_bytes(), out),
            Field::RequestUri => target(record, |bytes| escaped(bytes, out)),
            Field::ServerProtocol => out.extend_from_slice(protocol(record.version).as_bytes()),
            Field::Status => drop(write!(out, "{}", record.status.as_u16())),
            Field::BodyBytesSent => drop(write!(out, "{}", record.bytes)),
            Field::RequestTime => seconds(record.duration, out),
            Field::TimeLocal => {
                let time = self.clf_time(record.received);
                out.extend_from_slice(time.as_bytes());
            }
            Field::TimeIso8601 => drop(write!(
                out,
                "{}",
                humantime::format_rfc3339_seconds(record.received)
            )),
            Field::HttpReferer => quoted_field(record.referer.as_ref(), out),
            Field::HttpUserAgent => quoted_field(record.user_agent.as_ref(), out),
            Field::CacheStatus => {
                let mut text = String::with_capacity(64);
                crate::cache_status::write(&record.outcome, &mut text);
                escaped(text.as_bytes(), out);
            }
            Field::UpstreamAddr => match upstream {
                // Each server asked, the one that answered last, as nginx writes it.
                Some(upstream) => {
                    for addr in &upstream.earlier {
                        escaped(addr.as_bytes(), out);
                        out.extend_from_slice(b", ");
                    }
                    escaped(upstream.addr.as_bytes(), out);
                }
                None => out.push(b'-'),
            },
            Field::UpstreamStatus => match upstream {
                Some(upstream) => drop(write!(out, "{}", upstream.status.as_u16())),
                None => out.push(b'-'),
            },
            Field::UpstreamHeaderTime => match upstream {
                Some(upstream) => seconds(upstream.header_time, out),
                None => out.push(b'-'),
            },
        }
    }

    /// The client: the peer, or, when the peer is a trusted proxy, the last address of
    /// `X-Forwarded-For` that is not one too (nginx's `real_ip_recursive`); the first
    /// address when all are, and the peer when the field does not parse.
    fn client(&self, record: &Record) -> IpAddr {
        let trusted = |ip: &IpAddr| self.trusted.iter().any(|net| net.contains(ip));
        if !trusted(&record.peer) {
            return record.peer;
        }
        let Some(text) = record.forwarded_for.as_ref().and_then(|v| v.to_str().ok()) else {
            return record.peer;
        };
        let mut client = record.peer;
        for part in text.rsplit(',') {
            match part.trim().parse::<IpAddr>() {
                Ok(ip) => {
                    client = ip;
                    if !trusted(&ip) {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        client
    }

    /// `peer - - [time] "METHOD target PROTO" status bytes "referer" "agent"
    /// "cache-status" seconds`: nginx's `combined`, which log tools and `secondhit simulate
    /// --trace` read, and two quoted-or-numeric fields after it that such tools ignore.
    fn combined(&mut self, record: &Record, client: IpAddr, out: &mut Vec<u8>) {
        let time = self.clf_time(record.received);
        // Writes into a Vec cannot fail.
        let _ = write!(out, "{client} - - [{time}] \"");
        escaped(record.method.as_str().as_bytes(), out);
        out.push(b' ');
        target(record, |bytes| escaped(bytes, out));
        let _ = write!(
            out,
            " {}\" {} {} \"",
            protocol(record.version),
            record.status.as_u16(),
            record.bytes
        );
        quoted_field(record.referer.as_ref(), out);
        out.extend_from_slice(b"\" \"");
        quoted_field(record.user_agent.as_ref(), out);
        out.extend_from_slice(b"\" \"");
        let mut cache_status = String::with_capacity(64);
        crate::cache_status::write(&record.outcome, &mut cache_status);
        escaped(cache_status.as_bytes(), out);
        out.extend_from_slice(b"\" ");
        seconds(record.duration, out);
        out.push(b'\n');
    }

    /// `10/Oct/2026:13:55:36 +0000` for `time` (always UTC: no time-zone database needed,
    /// and lines from several nodes compare as they are).
    fn clf_time(&mut self, time: SystemTime) -> &str {
        let second = time
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if self.second != Some(second) {
            // humantime does the calendar: "2026-10-10T13:55:36Z", rearranged.
            let rfc3339 = humantime::format_rfc3339_seconds(time).to_string();
            let month = rfc3339
                .get(5..7)
                .and_then(|m| m.parse::<usize>().ok())
                .and_then(|m| MONTHS.get(m.wrapping_sub(1)))
                .unwrap_or(&"Jan");
            self.clf_time.clear();
            self.clf_time.push_str(rfc3339.get(8..10).unwrap_or("01"));
            self.clf_time.push('/');
            self.clf_time.push_str(month);
            self.clf_time.push('/');
            self.clf_time.push_str(rfc3339.get(0..4).unwrap_or("1970"));
            self.clf_time.push(':');
            self.clf_time
                .push_str(rfc3339.get(11..19).unwrap_or("00:00:00"));
            self.clf_time.push_str(" +0000");
            self.second = Some(second);
        }
        &self.clf_time
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The request target as the log shows it: HTTP/1 as received (origin form, or absolute form
/// when the client sent that); HTTP/2 has no request line, so its `:path`.
fn target(record: &Record, mut emit: impl FnMut(&[u8])) {
    if record.version >= Version::HTTP_2 || record.target.scheme().is_none() {
        let path = record.target.path_and_query().map_or("/", |pq| pq.as_str());
        emit(path.as_bytes());
    } else {
        emit(record.target.to_string().as_bytes());
    }
}

/// A `Host` value without its port (`[::1]:8080` keeps its brackets), as nginx's `$host`.
fn without_port(host: &[u8]) -> &[u8] {
    let end = match host.iter().rposition(|&b| b == b':') {
        Some(colon) if !host[colon..].contains(&b']') => colon,
        _ => host.len(),
    };
    &host[..end]
}

/// The protocol as a request line names it.
fn protocol(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// A header's value for a quoted field, `-` when absent (as nginx writes it).
fn quoted_field(value: Option<&HeaderValue>, out: &mut Vec<u8>) {
    match value {
        Some(value) => escaped(value.as_bytes(), out),
        None => out.push(b'-'),
    }
}

/// `bytes` with `"`, `\`, control bytes and bytes above ASCII as `\xHH`, as nginx escapes
/// its log variables: a field can never end early or break the line.
fn escaped(bytes: &[u8], out: &mut Vec<u8>) {
    for &byte in bytes {
        if byte == b'"' || byte == b'\\' || !(0x20..0x7f).contains(&byte) {
            let _ = write!(out, "\\x{byte:02X}");
        } else {
            out.push(byte);
        }
    }
}

/// `duration` in seconds with microseconds, e.g. `0.000143`.
fn seconds(duration: Duration, out: &mut Vec<u8>) {
    let _ = write!(
        out,
        "{}.{:06}",
        duration.as_secs(),
        duration.subsec_micros()
    );
}

/// One JSON line; the keys are nginx's variable names, so existing dashboards and parsers
/// recognise them. Serialised straight into `out`: no allocation per line.
fn json(record: &Record, client: IpAddr, out: &mut Vec<u8>) {
    #[derive(Serialize)]
    struct Line<'a> {
        time: Shown<humantime::Rfc3339Timestamp>,
        remote_addr: IpAddr,
        realip_remote_addr: IpAddr,
        host: Option<Cow<'a, str>>,
        request_method: &'a str,
        request_uri: Shown<Target<'a>>,
        server_protocol: &'static str,
        status: u16,
        body_bytes_sent: u64,
        http_referer: Option<Cow<'a, str>>,
        http_user_agent: Option<Cow<'a, str>>,
        cache_status: String,
        request_time: f64,
        upstream_addr: Option<Cow<'a, str>>,
        upstream_status: Option<u16>,
        upstream_header_time: Option<f64>,
    }
    let upstream = record.upstream.as_ref();
    let line = Line {
        time: Shown(humantime::format_rfc3339_micros(record.received)),
        remote_addr: client,
        realip_remote_addr: record.peer,
        host: record
            .host
            .as_ref()
            .map(|h| String::from_utf8_lossy(without_port(h.as_bytes()))),
        request_method: record.method.as_str(),
        request_uri: Shown(Target(record)),
        server_protocol: protocol(record.version),
        status: record.status.as_u16(),
        body_bytes_sent: record.bytes,
        http_referer: text(record.referer.as_ref()),
        http_user_agent: text(record.user_agent.as_ref()),
        cache_status: {
            let mut text = String::with_capacity(64);
            crate::cache_status::write(&record.outcome, &mut text);
            text
        },
        // Microseconds, as in the combined format: finer digits would be noise.
        request_time: record.duration.as_micros() as f64 / 1e6,
        upstream_addr: upstream.map(upstream_addrs),
        upstream_status: upstream.map(|u| u.status.as_u16()),
        upstream_header_time: upstream.map(|u| u.header_time.as_micros() as f64 / 1e6),
    };
    // Serialising these field types into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &line);
    out.push(b'\n');
}

/// A header's value as JSON text (invalid UTF-8 replaced).
fn text(value: Option<&HeaderValue>) -> Option<Cow<'_, str>> {
    value.map(|v| String::from_utf8_lossy(v.as_bytes()))
}

/// A value serialised as the string its `Display` writes, without an intermediate `String`.
struct Shown<T>(T);

impl<T: fmt::Display> Serialize for Shown<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// The request target of a record, displayed as [`target`] emits it.
struct Target<'a>(&'a Record);

impl fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut result = Ok(());
        target(self.0, |bytes| {
            result = result.and_then(|()| f.write_str(&String::from_utf8_lossy(bytes)));
        });
        result
    }
}

/// `upstream_addr`: each server asked, comma-separated, the one that answered last (one
/// alone but where `origin.retry` sent the request on).
fn upstream_addrs(upstream: &crate::origin::Upstream) -> Cow<'_, str> {
    if upstream.earlier.is_empty() {
        return Cow::Borrowed(&upstream.addr);
    }
    let mut addrs = upstream.earlier.join(", ");
    addrs.push_str(", ");
    addrs.push_str(&upstream.addr);
    Cow::Owned(addrs)
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use std::sync::Arc;

    use http::{Method, StatusCode, Uri};

    use super::*;
    use crate::origin::Upstream;
    use crate::outcome::{Forward, Outcome};

    /// 2026-10-10T13:55:36.25Z.
    fn at() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(1_791_640_536_250)
    }

    fn record(target: &str, version: Version) -> Record {
        Record {
            received: at(),
            peer: IpAddr::V4(Ipv4Addr::LOCALHOST),
            method: Method::GET,
            target: target.parse::<Uri>().expect("test target"),
            version,
            status: StatusCode::OK,
            referer: None,
            user_agent: Some(HeaderValue::from_static("curl/8.5.0")),
            host: Some(HeaderValue::from_static("www.example.test:8080")),
            forwarded_for: Some(HeaderValue::from_static("203.0.113.9, 10.0.0.7")),
            upstream: Some(Upstream {
                addr: Arc::from("10.1.1.1:8081"),
                earlier: Vec::new(),
                status: StatusCode::OK,
                header_time: Duration::from_micros(870),
            }),
            outcome: Outcome::forward(Forward::UriMiss).stored(),
            bytes: 2326,
            duration: Duration::from_micros(1_234),
        }
    }

    fn line(record: &Record, format: AccessFormat) -> String {
        line_behind(record, format, &[])
    }

    /// A line written with `trusted` proxies.
    fn line_behind(record: &Record, format: AccessFormat, trusted: &[&str]) -> String {
        let trusted = trusted
            .iter()
            .map(|t| t.parse().expect("network"))
            .collect();
        let mut out = Vec::new();
        LineFormat::new(format, trusted).append(record, &mut out);
        String::from_utf8(out).expect("lines are UTF-8")
    }

    fn template(text: &str) -> AccessFormat {
        AccessFormat::Template(crate::config::access_format::parse(text).expect("template"))
    }

    #[test]
    fn a_template_writes_every_variable_in_its_place() {
        let all: Vec<String> = crate::config::access_format::FIELDS
            .iter()
            .map(|(name, _)| format!("${name}"))
            .collect();
        let text = line(&record("/a?b", Version::HTTP_11), template(&all.join("|")));
        let values: Vec<&str> = text.trim_end_matches('\n').split('|').collect();
        assert_eq!(
            values,
            [
                "127.0.0.1",
                "127.0.0.1",
                "www.example.test",
                "GET /a?b HTTP/1.1",
                "GET",
                "/a?b",
                "HTTP/1.1",
                "200",
                "2326",
                "0.001234",
                "10/Oct/2026:13:55:36 +0000",
                "2026-10-10T13:55:36Z",
                "-",
                "curl/8.5.0",
                "secondhit; fwd=uri-miss; stored",
                "10.1.1.1:8081",
                "200",
                "0.000870",
            ]
        );
        let mut hit = record("/", Version::HTTP_11);
        (hit.upstream, hit.host) = (None, None);
        let text = line(
            &hit,
            template("$host $upstream_addr $upstream_status $upstream_header_time"),
        );
        assert_eq!(text, "- - - -\n", "what a hit does not have is -");
    }

    #[test]
    fn behind_a_trusted_proxy_the_client_is_the_last_untrusted_forwarded_address() {
        let record = record("/", Version::HTTP_11);
        let fields = template("$remote_addr $realip_remote_addr");
        // The peer (127.0.0.1) is not trusted: X-Forwarded-For is the client's to forge.
        assert_eq!(line(&record, fields.clone()), "127.0.0.1 127.0.0.1\n");
        // Trusted peer, then 10.0.0.7 is trusted too: the client is 203.0.113.9.
        let both = ["127.0.0.1/32", "10.0.0.0/8"];
        assert_eq!(
            line_behind(&record, fields.clone(), &both),
            "203.0.113.9 127.0.0.1\n"
        );
        // Only the peer trusted: the nearest address is the client.
        assert_eq!(
            line_behind(&record, fields.clone(), &["127.0.0.0/8"]),
            "10.0.0.7 127.0.0.1\n"
        );
        let combined = line_behind(&record, AccessFormat::Combined, &both);
        assert!(combined.starts_with("203.0.113.9 - - ["), "{combined}");
        let json = line_behind(&record, AccessFormat::Json, &both);
        let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(value["remote_addr"], "203.0.113.9");
        assert_eq!(value["realip_remote_addr"], "127.0.0.1");
        // A field that does not parse stops the walk: the peer is kept.
        let mut forged = record;
        forged.forwarded_for = Some(HeaderValue::from_static("not-an-address"));
        assert_eq!(line_behind(&forged, fields, &both), "127.0.0.1 127.0.0.1\n");
    }

    #[test]
    fn the_host_loses_its_port_but_an_ipv6_host_keeps_its_brackets() {
        assert_eq!(without_port(b"example.test:8080"), b"example.test");
        assert_eq!(without_port(b"example.test"), b"example.test");
        assert_eq!(without_port(b"[::1]:8080"), b"[::1]");
        assert_eq!(without_port(b"[::1]"), b"[::1]");
    }

    #[test]
    fn combined_lines_are_nginx_combined_with_cache_status_and_seconds() {
        assert_eq!(
            line(
                &record("/a.png?x=1", Version::HTTP_11),
                AccessFormat::Combined
            ),
            "127.0.0.1 - - [10/Oct/2026:13:55:36 +0000] \"GET /a.png?x=1 HTTP/1.1\" 200 2326 \
             \"-\" \"curl/8.5.0\" \"secondhit; fwd=uri-miss; stored\" 0.001234\n"
        );
    }

    #[test]
    fn http2_and_absolute_targets_are_shown_as_a_request_line_would() {
        let h2 = line(
            &record("http://example.test/p?q", Version::HTTP_2),
            AccessFormat::Combined,
        );
        assert!(h2.contains("\"GET /p?q HTTP/2.0\""), "{h2}");
        let absolute = line(
            &record("http://example.test/p", Version::HTTP_11),
            AccessFormat::Combined,
        );
        assert!(
            absolute.contains("\"GET http://example.test/p HTTP/1.1\""),
            "{absolute}"
        );
    }

    #[test]
    fn quotes_backslashes_and_control_bytes_are_escaped() {
        let mut record = record("/", Version::HTTP_11);
        record.user_agent = Some(HeaderValue::from_bytes(b"a\"b\\c\td\xff").expect("header value"));
        let text = line(&record, AccessFormat::Combined);
        assert!(text.contains("\"a\\x22b\\x5Cc\\x09d\\xFF\""), "{text}");
        assert_eq!(text.matches('"').count(), 8, "four quoted fields: {text}");
    }

    #[test]
    fn json_lines_carry_the_same_fields() {
        let text = line(&record("/a.png", Version::HTTP_11), AccessFormat::Json);
        assert!(text.ends_with('\n'));
        let value: serde_json::Value = serde_json::from_str(&text).expect("one JSON object");
        assert_eq!(value["time"], "2026-10-10T13:55:36.250000Z");
        assert_eq!(value["remote_addr"], "127.0.0.1");
        assert_eq!(value["request_method"], "GET");
        assert_eq!(value["request_uri"], "/a.png");
        assert_eq!(value["server_protocol"], "HTTP/1.1");
        assert_eq!(value["status"], 200);
        assert_eq!(value["body_bytes_sent"], 2326);
        assert_eq!(value["http_referer"], serde_json::Value::Null);
        assert_eq!(value["http_user_agent"], "curl/8.5.0");
        assert_eq!(value["cache_status"], "secondhit; fwd=uri-miss; stored");
        assert_eq!(value["request_time"], 0.001234);
        assert_eq!(value["host"], "www.example.test");
        assert_eq!(value["upstream_addr"], "10.1.1.1:8081");
        assert_eq!(value["upstream_status"], 200);
        assert_eq!(value["upstream_header_time"], 0.00087);
    }

    #[test]
    fn a_retried_request_names_every_server_asked_the_one_that_answered_last() {
        let mut retried = record("/r", Version::HTTP_11);
        if let Some(upstream) = retried.upstream.as_mut() {
            upstream.earlier = vec![Arc::from("10.1.1.2:8081"), Arc::from("10.1.1.3:8081")];
        }
        let text = line(&retried, template("$upstream_addr $upstream_status"));
        assert_eq!(text, "10.1.1.2:8081, 10.1.1.3:8081, 10.1.1.1:8081 200\n");
        let json = line(&retried, AccessFormat::Json);
        let value: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
        assert_eq!(
            value["upstream_addr"],
            "10.1.1.2:8081, 10.1.1.3:8081, 10.1.1.1:8081"
        );
    }

    #[test]
    fn the_cached_second_is_reformatted_when_the_second_changes() {
        let mut format = LineFormat::new(AccessFormat::Combined, Vec::new());
        let mut out = Vec::new();
        let mut record = record("/", Version::HTTP_11);
        format.append(&record, &mut out);
        record.received = at() + Duration::from_secs(86_400 * 30);
        format.append(&record, &mut out);
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(text.contains("[10/Oct/2026:13:55:36 +0000]"), "{text}");
        assert!(text.contains("[09/Nov/2026:13:55:36 +0000]"), "{text}");
    }
}
