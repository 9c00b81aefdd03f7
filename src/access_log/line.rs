//! One access-log line from a [`Record`], appended to a reused buffer: nginx's `combined`
//! format with two fields more, or a JSON object. Pure formatting, no I/O; it runs on the
//! writer thread, never on the request path.

use std::borrow::Cow;
use std::fmt;
use std::io::Write;
use std::time::{Duration, SystemTime};

use http::{HeaderValue, Version};
use serde::Serialize;

use super::Record;
use crate::config::AccessFormat;

/// Formats lines, keeping the `[day/Mon/year:hh:mm:ss +0000]` text of the last second it
/// formatted: consecutive lines mostly fall in the same second.
#[derive(Default)]
pub(super) struct LineFormat {
    /// Unix second of `clf_time`, or `None` before the first line.
    second: Option<u64>,
    /// The common-log-format time of that second.
    clf_time: String,
}

impl LineFormat {
    /// Appends `record` as one line (newline included) in `format` to `out`.
    pub(super) fn append(&mut self, record: &Record, format: AccessFormat, out: &mut Vec<u8>) {
        match format {
            AccessFormat::Combined => self.combined(record, out),
            AccessFormat::Json => json(record, out),
        }
    }

    /// `peer - - [time] "METHOD target PROTO" status bytes "referer" "agent"
    /// "cache-status" seconds`: nginx's `combined`, which log tools and `secondhit simulate
    /// --trace` read, and two quoted-or-numeric fields after it that such tools ignore.
    fn combined(&mut self, record: &Record, out: &mut Vec<u8>) {
        let time = self.clf_time(record.received);
        // Writes into a Vec cannot fail.
        let _ = write!(out, "{} - - [{time}] \"", record.peer);
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
fn json(record: &Record, out: &mut Vec<u8>) {
    #[derive(Serialize)]
    struct Line<'a> {
        time: Shown<humantime::Rfc3339Timestamp>,
        remote_addr: std::net::IpAddr,
        request_method: &'a str,
        request_uri: Shown<Target<'a>>,
        server_protocol: &'static str,
        status: u16,
        body_bytes_sent: u64,
        http_referer: Option<Cow<'a, str>>,
        http_user_agent: Option<Cow<'a, str>>,
        cache_status: String,
        request_time: f64,
    }
    let line = Line {
        time: Shown(humantime::format_rfc3339_micros(record.received)),
        remote_addr: record.peer,
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

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use http::{Method, StatusCode, Uri};

    use super::*;
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
            outcome: Outcome::forward(Forward::UriMiss).stored(),
            bytes: 2326,
            duration: Duration::from_micros(1_234),
        }
    }

    fn line(record: &Record, format: AccessFormat) -> String {
        let mut out = Vec::new();
        LineFormat::default().append(record, format, &mut out);
        String::from_utf8(out).expect("lines are UTF-8")
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
    }

    #[test]
    fn the_cached_second_is_reformatted_when_the_second_changes() {
        let mut format = LineFormat::default();
        let mut out = Vec::new();
        let mut record = record("/", Version::HTTP_11);
        format.append(&record, AccessFormat::Combined, &mut out);
        record.received = at() + Duration::from_secs(86_400 * 30);
        format.append(&record, AccessFormat::Combined, &mut out);
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(text.contains("[10/Oct/2026:13:55:36 +0000]"), "{text}");
        assert!(text.contains("[09/Nov/2026:13:55:36 +0000]"), "{text}");
    }
}
