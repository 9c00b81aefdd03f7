//! Trace replay: an nginx/Apache access log (common or combined format, which includes
//! secondhit's own `log.access_format = "combined"`), secondhit's JSON-lines access log
//! (`log.access_format = "json"`), a CSV of `timestamp,key,size`, or one of the formats
//! public cache traces come in: libCacheSim's `oracleGeneral` binary and Twitter's
//! cache-trace CSV. Read into a [`Workload`]; a malformed line or record is skipped and
//! counted, never a panic.
//!
//! - `oracleGeneral` (libCacheSim, e.g. the traces of the S3-FIFO and SIEVE papers): packed
//!   little-endian 24-byte records `u32 timestamp (s), u64 obj_id, u32 obj_size, i64
//!   next_access_vtime`; the last field (the future, for Belady) is not used. A compressed
//!   `.zst` file must be decompressed first (`zstd -d`).
//! - Twitter (`twitter/cache-trace`): `timestamp,key,key size,value size,client,op,ttl`.
//!   `get` and `gets` are the requests, each of `key size + value size` bytes as
//!   libCacheSim counts them; a get whose value size is 0 keeps the object's last known
//!   size. `set`, `add`, `replace`, `cas`, `append` and `prepend` are not requests: a reverse
//!   proxy fills its cache on a read miss, while a write goes to the origin. They only tell
//!   the object's new size to the gets after them, and are counted as ignored lines, like
//!   `delete`, `incr` and `decr`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use xxhash_rust::xxh3::xxh3_64;

use http::Method;

use super::{Request, Workload, WorkloadError};

/// The layout of a trace file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    /// nginx/Apache common or combined log format.
    AccessLog,
    /// secondhit's JSON-lines access log: one object per line with nginx's variable names
    /// (`time`, `request_method`, `request_uri`, `status`, `body_bytes_sent`).
    JsonLines,
    /// `timestamp,key,size` lines (an optional header line is skipped).
    Csv,
    /// libCacheSim's `oracleGeneral` binary records (see the module docs).
    OracleGeneral,
    /// Twitter's cache-trace CSV, `timestamp,key,key size,value size,client,op,ttl`.
    Twitter,
}

/// The operations of a Twitter trace that write an object (see the module docs).
const TWITTER_WRITES: [&str; 6] = ["set", "add", "replace", "cas", "append", "prepend"];
/// The operations of a Twitter trace that read one.
const TWITTER_READS: [&str; 2] = ["get", "gets"];
/// The other operations a Twitter trace has.
const TWITTER_OTHERS: [&str; 3] = ["delete", "incr", "decr"];
/// Bytes of one `oracleGeneral` record.
const ORACLE_RECORD: usize = 24;

impl TraceFormat {
    /// The format's name as `--trace-format` takes it (`csv`, `oracle-general`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::AccessLog => "access-log",
            TraceFormat::JsonLines => "json-lines",
            TraceFormat::Csv => "csv",
            TraceFormat::OracleGeneral => "oracle-general",
            TraceFormat::Twitter => "twitter",
        }
    }

    /// `.csv` files are CSV, `.jsonl` and `.json` files JSON lines; anything else is read as
    /// an access log (or as JSON lines, if it starts with `{`: see [`from_trace`]).
    pub fn from_path(path: &Path) -> TraceFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("csv") => TraceFormat::Csv,
            Some(ext) if ext.eq_ignore_ascii_case("jsonl") || ext.eq_ignore_ascii_case("json") => {
                TraceFormat::JsonLines
            }
            _ => TraceFormat::AccessLog,
        }
    }
}

/// Reads a trace file, its format detected (see [`detect_format`]).
pub fn from_trace(path: &Path) -> Result<Workload, WorkloadError> {
    from_trace_as(path, None)
}

/// Reads a trace file in `format`, or in the format [`detect_format`] finds.
pub fn from_trace_as(path: &Path, format: Option<TraceFormat>) -> Result<Workload, WorkloadError> {
    let failed = |source| WorkloadError::Trace {
        path: path.to_owned(),
        source,
    };
    let (reader, format) = open(path, format).map_err(failed)?;
    let name = path.display().to_string();
    let workload = match format {
        TraceFormat::OracleGeneral => parse_oracle_general(reader, &name),
        _ => parse_trace(reader, format, &name),
    }
    .map_err(failed)?;
    if workload.requests.is_empty() {
        return Err(WorkloadError::EmptyTrace {
            path: path.to_owned(),
            malformed: workload.malformed_lines,
            ignored: workload.ignored_lines,
        });
    }
    Ok(workload)
}

/// One request of an access log as its client sent it: what a replay sends again.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedRequest {
    /// When it was received, in seconds (only differences matter).
    pub at: f64,
    /// GET or HEAD: other methods are not replayed.
    pub method: Method,
    /// The request target as the client sent it: origin form (`/a?b=1`), or absolute form
    /// when the client sent that (an access log's `\xHH` escapes undone).
    pub target: String,
    /// The `Host` the log names, without port (secondhit's JSON log names it).
    pub host: Option<String>,
}

/// The requests of an access log, read for a replay.
#[derive(Clone, Debug)]
pub struct RequestLog {
    /// What the log is, for reports.
    pub name: String,
    /// Its GET and HEAD requests, in order.
    pub requests: Vec<LoggedRequest>,
    /// Lines skipped because they could not be parsed.
    pub malformed_lines: u64,
    /// Requests of other methods, not replayed (a load test must not repeat a POST).
    pub skipped_methods: u64,
}

/// Reads the requests of the access log at `path`, in `format` or the one detected; a trace
/// format that records keys rather than requests (CSV, `oracleGeneral`, Twitter) is refused.
pub fn requests_from_trace(
    path: &Path,
    format: Option<TraceFormat>,
) -> Result<RequestLog, WorkloadError> {
    let failed = |source| WorkloadError::Trace {
        path: path.to_owned(),
        source,
    };
    let (reader, format) = open(path, format).map_err(failed)?;
    if !matches!(format, TraceFormat::AccessLog | TraceFormat::JsonLines) {
        return Err(WorkloadError::NoRequests {
            path: path.to_owned(),
            format,
        });
    }
    let mut log = parse_request_log(reader, format, &path.display().to_string()).map_err(failed)?;
    if format == TraceFormat::AccessLog {
        for request in &mut log.requests {
            request.target = unescaped(&request.target);
        }
    }
    if log.requests.is_empty() {
        return Err(WorkloadError::EmptyTrace {
            path: path.to_owned(),
            malformed: log.malformed_lines,
            ignored: log.skipped_methods,
        });
    }
    Ok(log)
}

/// An access log's field with its `\xHH` escapes (nginx's and secondhit's, for `"`, `\`,
/// control bytes and bytes above ASCII) turned back into the bytes they stand for.
fn unescaped(field: &str) -> String {
    if !field.contains("\\x") {
        return field.to_owned();
    }
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escape = (bytes[at] == b'\\' && bytes.get(at + 1) == Some(&b'x'))
            .then(|| field.get(at + 2..at + 4))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escape {
            Some(byte) => {
                out.push(byte);
                at += 4;
            }
            None => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Opens the trace at `path` and settles its format: `format`, or the one detected.
fn open(path: &Path, format: Option<TraceFormat>) -> io::Result<(BufReader<File>, TraceFormat)> {
    let mut reader = BufReader::new(File::open(path)?);
    let format = match format {
        Some(format) => format,
        None => detect_format(path, reader.fill_buf()?)?,
    };
    Ok((reader, format))
}

/// The format of the trace at `path` whose first bytes are `start`: `oracleGeneral` in the
/// name means libCacheSim's binary (an error if it is still `.zst`-compressed); a first line
/// of seven fields whose sixth is an operation is Twitter's; a first byte `{` means JSON
/// lines; otherwise the extension decides ([`TraceFormat::from_path`]).
pub fn detect_format(path: &Path, start: &[u8]) -> io::Result<TraceFormat> {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.ends_with(".zst") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a zstd-compressed trace: decompress it first (zstd -d)",
        ));
    }
    if name.contains("oraclegeneral") {
        return Ok(TraceFormat::OracleGeneral);
    }
    let first_line = start.split(|&b| b == b'\n').next().unwrap_or_default();
    if matches!(
        parse_twitter_line(&String::from_utf8_lossy(first_line)),
        Line::Request { .. } | Line::Update { .. } | Line::Ignored
    ) {
        return Ok(TraceFormat::Twitter);
    }
    if start.starts_with(b"{") {
        return Ok(TraceFormat::JsonLines);
    }
    Ok(TraceFormat::from_path(path))
}

/// What an access-log line says its client sent, besides the target.
struct Sent {
    /// GET or HEAD.
    method: Method,
    /// The `Host` the line names (secondhit's JSON log does), without its port.
    host: Option<String>,
}

/// What one trace line says.
enum Line {
    /// A request for `key` at `at` (seconds) whose response had `size` bytes (`None`: size
    /// unknown, e.g. a 304).
    Request {
        key: String,
        size: Option<u64>,
        at: f64,
        /// What the client sent besides the target (`key`): only access logs say.
        sent: Option<Sent>,
    },
    /// A write of `key` with `size` bytes: not a request, but later requests have that size.
    Update { key: String, size: u64 },
    /// A line to skip silently (a CSV header, a blank line).
    Skip,
    /// A valid line that is not a cacheable request (another method).
    Ignored,
    /// A line that cannot be parsed.
    Malformed,
}

/// Parses a trace from `reader`; `name` describes it in reports. Only I/O errors fail.
pub fn parse_trace(reader: impl BufRead, format: TraceFormat, name: &str) -> io::Result<Workload> {
    let mut sizes: HashMap<String, u64> = HashMap::new();
    let mut workload = Workload {
        name: format!("trace: {name}"),
        requests: Vec::new(),
        malformed_lines: 0,
        ignored_lines: 0,
    };
    read_lines(reader, format, |parsed| match parsed {
        Line::Request { key, size, at, .. } => {
            // A response without a body size (304, 206, "-") keeps the object's last known size.
            let size = match size {
                Some(size) => *sizes
                    .entry(key.clone())
                    .and_modify(|s| *s = size)
                    .or_insert(size),
                None => sizes.get(&key).copied().unwrap_or(0),
            };
            workload.requests.push(Request {
                object: xxh3_64(key.as_bytes()),
                size,
                at,
            });
        }
        Line::Update { key, size } => {
            sizes.insert(key, size);
            workload.ignored_lines += 1;
        }
        Line::Skip => {}
        Line::Ignored => workload.ignored_lines += 1,
        Line::Malformed => workload.malformed_lines += 1,
    })?;
    Ok(workload)
}

/// Parses an access log from `reader` for a replay: each GET or HEAD as its client sent
/// it. Only I/O errors fail.
pub fn parse_request_log(
    reader: impl BufRead,
    format: TraceFormat,
    name: &str,
) -> io::Result<RequestLog> {
    let mut log = RequestLog {
        name: format!("trace: {name}"),
        requests: Vec::new(),
        malformed_lines: 0,
        skipped_methods: 0,
    };
    read_lines(reader, format, |parsed| match parsed {
        Line::Request {
            key,
            at,
            sent: Some(Sent { method, host }),
            ..
        } => log.requests.push(LoggedRequest {
            at,
            method,
            target: key,
            host,
        }),
        Line::Ignored => log.skipped_methods += 1,
        Line::Skip => {}
        // Only the access logs' lines say what was sent; the others have no request.
        Line::Request { .. } | Line::Update { .. } | Line::Malformed => log.malformed_lines += 1,
    })?;
    Ok(log)
}

/// Parses each line of `reader` in `format` and hands it to `each`. Only I/O errors fail.
fn read_lines(
    reader: impl BufRead,
    format: TraceFormat,
    mut each: impl FnMut(Line),
) -> io::Result<()> {
    for line in reader.split(b'\n') {
        // Logs are not always valid UTF-8; a lossy read keeps the line countable.
        let line = line?;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\r');
        each(match format {
            TraceFormat::AccessLog => parse_access_log_line(text),
            TraceFormat::JsonLines => parse_json_line(text),
            TraceFormat::Csv => parse_csv_line(text),
            TraceFormat::Twitter => parse_twitter_line(text),
            // Binary, never split into lines (see `parse_oracle_general`).
            TraceFormat::OracleGeneral => Line::Malformed,
        });
    }
    Ok(())
}

/// `host ident user [time] "METHOD target PROTO" status bytes ["referer" "agent"]`
fn parse_access_log_line(text: &str) -> Line {
    if text.trim().is_empty() {
        return Line::Skip;
    }
    let Some((before, rest)) = text.split_once('"') else {
        return Line::Malformed;
    };
    let Some(at) = log_time(before) else {
        return Line::Malformed;
    };
    let Some((request_line, rest)) = rest.split_once('"') else {
        return Line::Malformed;
    };
    let mut request = request_line.split_ascii_whitespace();
    let (Some(method), Some(target)) = (request.next(), request.next()) else {
        return Line::Malformed;
    };
    let mut fields = rest.split_ascii_whitespace();
    let (Some(status), Some(bytes)) = (fields.next(), fields.next()) else {
        return Line::Malformed;
    };
    let Ok(status) = status.parse::<u16>() else {
        return Line::Malformed;
    };
    let size = match bytes {
        "-" => None,
        digits => match digits.parse::<u64>() {
            Ok(size) => Some(size),
            Err(_) => return Line::Malformed,
        },
    };
    trace_request(method, target, status, size, at, None)
}

/// A request of a trace line: only GET and HEAD count, and only a full `200` to a GET tells
/// the object's size.
fn trace_request(
    method: &str,
    target: &str,
    status: u16,
    size: Option<u64>,
    at: f64,
    host: Option<&str>,
) -> Line {
    let method = match method {
        "GET" => Method::GET,
        "HEAD" => Method::HEAD,
        _ => return Line::Ignored,
    };
    let size = if status == 200 && method == Method::GET {
        size
    } else {
        None
    };
    Line::Request {
        key: target.to_owned(),
        size,
        at,
        sent: Some(Sent {
            method,
            host: host.map(str::to_owned),
        }),
    }
}

/// One line of secondhit's JSON access log (`log.access_format = "json"`); other fields
/// are ignored.
#[derive(serde::Deserialize)]
struct JsonLine<'a> {
    /// RFC 3339, e.g. `2026-10-10T13:55:36.250000Z`.
    #[serde(borrow)]
    time: Cow<'a, str>,
    #[serde(borrow)]
    request_method: Cow<'a, str>,
    #[serde(borrow)]
    request_uri: Cow<'a, str>,
    status: u16,
    body_bytes_sent: Option<u64>,
    /// The client's `Host`, without port; `null` when it sent none.
    #[serde(borrow, default)]
    host: Option<Cow<'a, str>>,
}

fn parse_json_line(text: &str) -> Line {
    if text.trim().is_empty() {
        return Line::Skip;
    }
    let Ok(line) = serde_json::from_str::<JsonLine<'_>>(text) else {
        return Line::Malformed;
    };
    let Some(at) = humantime::parse_rfc3339_weak(&line.time)
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
    else {
        return Line::Malformed;
    };
    trace_request(
        &line.request_method,
        &line.request_uri,
        line.status,
        line.body_bytes_sent,
        at.as_secs_f64(),
        line.host.as_deref(),
    )
}

/// The `[10/Oct/2026:13:55:36 +0000]` field of an access-log line, as unix seconds.
fn log_time(fields: &str) -> Option<f64> {
    let inside = fields.split_once('[')?.1.split_once(']')?.0;
    let (stamp, zone) = inside.split_once(' ')?;
    let mut parts = stamp.splitn(4, ['/', ':']);
    let day: i64 = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let rest = parts.next()?; // year
    let year: i64 = rest.parse().ok()?;
    let clock: Vec<i64> = parts
        .next()?
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == month)? as i64
        + 1;
    let (&[hour, minute, second], true) = (clock.as_slice(), (1..=31).contains(&day)) else {
        return None;
    };
    let sign = match zone.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let zone: i64 = zone.get(1..)?.parse().ok()?;
    let offset = sign * ((zone / 100) * 3600 + (zone % 100) * 60);
    Some(
        (days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
            as f64,
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// `timestamp,key,size`; the key may itself contain commas.
fn parse_csv_line(text: &str) -> Line {
    let text = text.trim();
    if text.is_empty() {
        return Line::Skip;
    }
    let (Some((timestamp, rest)), Some((_, size))) = (text.split_once(','), text.rsplit_once(','))
    else {
        return Line::Malformed;
    };
    let Some((key, _)) = rest.rsplit_once(',') else {
        return Line::Malformed;
    };
    if timestamp.trim() == "timestamp" && key.trim() == "key" {
        return Line::Skip;
    }
    match (timestamp.trim().parse::<f64>(), size.trim().parse::<u64>()) {
        (Ok(at), Ok(size)) if at.is_finite() && !key.trim().is_empty() => Line::Request {
            key: key.trim().to_owned(),
            size: Some(size),
            at,
            sent: None,
        },
        _ => Line::Malformed,
    }
}

/// `timestamp,key,key size,value size,client,op,ttl`; the key may itself contain commas.
fn parse_twitter_line(text: &str) -> Line {
    let text = text.trim();
    if text.is_empty() {
        return Line::Skip;
    }
    let mut right = text.rsplitn(6, ',');
    let (Some(_ttl), Some(op), Some(_client), Some(value_size), Some(key_size), Some(left)) = (
        right.next(),
        right.next(),
        right.next(),
        right.next(),
        right.next(),
        right.next(),
    ) else {
        return Line::Malformed;
    };
    let Some((timestamp, key)) = left.split_once(',') else {
        return Line::Malformed;
    };
    let (Ok(at), Ok(key_size), Ok(value_size)) = (
        timestamp.trim().parse::<f64>(),
        key_size.trim().parse::<u64>(),
        value_size.trim().parse::<u64>(),
    ) else {
        return Line::Malformed;
    };
    let op = op.trim();
    if !at.is_finite() || key.is_empty() {
        return Line::Malformed;
    }
    let key = key.to_owned();
    let size = key_size + value_size;
    if TWITTER_READS.contains(&op) {
        let size = (value_size > 0).then_some(size);
        Line::Request {
            key,
            size,
            at,
            sent: None,
        }
    } else if TWITTER_WRITES.contains(&op) {
        Line::Update { key, size }
    } else if TWITTER_OTHERS.contains(&op) {
        Line::Ignored
    } else {
        Line::Malformed
    }
}

/// Reads libCacheSim `oracleGeneral` records from `reader`; `name` describes the trace. A
/// last record cut short is counted as malformed. Only I/O errors fail.
pub fn parse_oracle_general(mut reader: impl BufRead, name: &str) -> io::Result<Workload> {
    let mut workload = Workload {
        name: format!("trace: {name}"),
        requests: Vec::new(),
        malformed_lines: 0,
        ignored_lines: 0,
    };
    let mut record = [0u8; ORACLE_RECORD];
    loop {
        let filled = read_full(&mut reader, &mut record)?;
        if filled < ORACLE_RECORD {
            if filled > 0 {
                workload.malformed_lines += 1;
            }
            return Ok(workload);
        }
        let field = |at: usize, len: usize| {
            record[at..at + len]
                .iter()
                .rev()
                .fold(0u64, |value, &byte| value << 8 | u64::from(byte))
        };
        workload.requests.push(Request {
            at: field(0, 4) as f64,
            object: field(4, 8),
            size: field(12, 4),
        });
    }
}

/// Reads until `buf` is full or the input ends; the bytes read.
fn read_full(reader: &mut impl BufRead, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    use super::*;

    #[test]
    fn access_logs_in_common_and_combined_format_are_read() {
        let log = "\
    127.0.0.1 - - [10/Oct/2026:13:55:36 +0000] \"GET /a.png HTTP/1.1\" 200 2326\n\
    127.0.0.1 - frank [10/Oct/2026:13:55:37 +0000] \"GET /b?x=1 HTTP/1.1\" 200 100 \"http://ref/\" \"curl/8\"\n\
    127.0.0.1 - - [10/Oct/2026:13:55:38 +0000] \"GET /a.png HTTP/1.1\" 304 -\n\
    127.0.0.1 - - [10/Oct/2026:13:55:39 +0000] \"POST /form HTTP/1.1\" 200 5\n\
    garbage line without quotes\n\
    127.0.0.1 - - [10/Oct/2026:13:55:40 +0000] \"GET /c HTTP/1.1\" abc 10\n\
    \n";
        let workload =
            parse_trace(log.as_bytes(), TraceFormat::AccessLog, "test").expect("in-memory read");
        let sizes: Vec<u64> = workload.requests.iter().map(|r| r.size).collect();
        assert_eq!(sizes, [2326, 100, 2326], "a 304 keeps the object's size");
        assert_eq!(workload.requests[0].object, workload.requests[2].object);
        assert_eq!(workload.ignored_lines, 1);
        assert_eq!(workload.malformed_lines, 2);
        let times: Vec<f64> = workload.requests.iter().map(|r| r.at).collect();
        // 2026-10-10T13:55:36Z is 1791640536 unix seconds.
        assert_eq!(times, [1_791_640_536.0, 1_791_640_537.0, 1_791_640_538.0]);
    }

    #[test]
    fn json_access_logs_are_read_like_combined_ones() {
        let log = r#"{"time":"2026-10-10T13:55:36.250000Z","request_method":"GET","request_uri":"/a\"b","status":200,"body_bytes_sent":2326,"cache_status":"secondhit; hit"}
{"time":"2026-10-10T13:55:37Z","request_method":"HEAD","request_uri":"/a\"b","status":200,"body_bytes_sent":0}
{"time":"2026-10-10T13:55:38Z","request_method":"POST","request_uri":"/form","status":200,"body_bytes_sent":5}
{"time":"yesterday","request_method":"GET","request_uri":"/c","status":200,"body_bytes_sent":1}
not json
"#;
        let workload =
            parse_trace(log.as_bytes(), TraceFormat::JsonLines, "test").expect("in-memory read");
        let sizes: Vec<u64> = workload.requests.iter().map(|r| r.size).collect();
        assert_eq!(sizes, [2326, 2326], "a HEAD keeps the object's size");
        assert_eq!(workload.requests[0].object, xxh3_64(b"/a\"b"));
        assert_eq!(workload.requests[0].at, 1_791_640_536.25);
        assert_eq!(workload.ignored_lines, 1);
        assert_eq!(workload.malformed_lines, 2);
    }

    #[test]
    fn access_logs_read_for_a_replay_keep_what_each_client_sent() {
        let dir = tempfile::tempdir().expect("temp dir");
        let combined = dir.path().join("access.log");
        std::fs::write(
            &combined,
            "1.2.3.4 - - [10/Oct/2026:13:55:36 +0000] \"GET /a\\x22b?c=1 HTTP/1.1\" 200 5\n\
             1.2.3.4 - - [10/Oct/2026:13:55:37 +0000] \"HEAD http://x.example/h HTTP/1.1\" 200 0\n\
             1.2.3.4 - - [10/Oct/2026:13:55:38 +0000] \"POST /form HTTP/1.1\" 200 5\n\
             not a line\n",
        )
        .expect("write log");
        let log = requests_from_trace(&combined, None).expect("a combined log");
        let sent: Vec<(&str, &str, Option<&str>, f64)> = (log.requests.iter())
            .map(|r| {
                (
                    r.method.as_str(),
                    r.target.as_str(),
                    r.host.as_deref(),
                    r.at,
                )
            })
            .collect();
        assert_eq!(
            sent,
            [
                ("GET", "/a\"b?c=1", None, 1_791_640_536.0),
                ("HEAD", "http://x.example/h", None, 1_791_640_537.0),
            ]
        );
        assert_eq!((log.skipped_methods, log.malformed_lines), (1, 1));
        let json = dir.path().join("access.jsonl");
        let line = r#"{"time":"2026-10-10T13:55:36Z","host":"b.example","request_method":"GET","request_uri":"/x\\x41","status":200,"body_bytes_sent":5}"#;
        std::fs::write(&json, format!("{line}\n")).expect("write log");
        let log = requests_from_trace(&json, None).expect("a JSON log");
        // The JSON log's targets are not escaped: what looks like an escape is the target.
        assert_eq!(log.requests[0].target, "/x\\x41");
        assert_eq!(log.requests[0].host.as_deref(), Some("b.example"));
        let csv = dir.path().join("keys.csv");
        std::fs::write(&csv, "0,/a,10\n").expect("write trace");
        assert!(matches!(
            requests_from_trace(&csv, None),
            Err(WorkloadError::NoRequests {
                format: TraceFormat::Csv,
                ..
            })
        ));
    }

    #[test]
    fn format_names_are_the_ones_trace_format_takes() {
        use clap::ValueEnum;
        for format in TraceFormat::value_variants() {
            let value = format.to_possible_value().expect("every format is a value");
            assert_eq!(format.name(), value.get_name());
        }
    }

    #[test]
    fn csv_traces_are_read_and_bad_lines_counted() {
        let csv =
            "timestamp,key,size\n1.5,/a,10\n2,/b,with,commas,20\n3,/c,notanumber\nnope\n4,,5\n";
        let workload =
            parse_trace(csv.as_bytes(), TraceFormat::Csv, "test").expect("in-memory read");
        let sizes: Vec<u64> = workload.requests.iter().map(|r| r.size).collect();
        assert_eq!(sizes, [10, 20]);
        assert_eq!(workload.requests[1].object, xxh3_64(b"/b,with,commas"));
        assert_eq!(workload.malformed_lines, 3);
    }

    #[test]
    fn twitter_traces_read_gets_as_requests_and_sets_as_sizes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("cluster52.000");
        let lines = "\
0,key1,4,100,1,get,0
1,key2,4,0,1,get,0
2,key2,4,50,1,set,3600
3,key2,4,0,2,gets,0
4,key1,4,0,1,delete,0
5,a,b,c,d,get
6,k,e,y,4,10,1,get,0
";
        std::fs::write(&path, lines).expect("write trace");
        let workload = from_trace(&path).expect("a Twitter trace, detected");
        let sizes: Vec<u64> = workload.requests.iter().map(|r| r.size).collect();
        // key + value bytes; a get of value size 0 keeps the size the set before it told.
        assert_eq!(sizes, [104, 0, 54, 14]);
        assert_eq!(workload.requests[1].object, workload.requests[2].object);
        assert_eq!(workload.requests[3].object, xxh3_64(b"k,e,y"));
        assert_eq!(workload.requests[2].at, 3.0);
        assert_eq!((workload.ignored_lines, workload.malformed_lines), (2, 1));
    }

    /// One `oracleGeneral` record, little-endian.
    fn oracle_record(time: u32, id: u64, size: u32, next: i64) -> Vec<u8> {
        [
            &time.to_le_bytes()[..],
            &id.to_le_bytes(),
            &size.to_le_bytes(),
            &next.to_le_bytes(),
        ]
        .concat()
    }

    #[test]
    fn oracle_general_traces_read_their_24_byte_records() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut bytes = [
            oracle_record(10, 1, 100, 2),
            oracle_record(11, u64::MAX - 1, 200, -1),
            oracle_record(12, 1, 100, -1),
        ]
        .concat();
        bytes.extend_from_slice(&[1, 2, 3, 4, 5]);
        let path = dir.path().join("w01.oracleGeneral.bin");
        std::fs::write(&path, &bytes).expect("write trace");
        let workload = from_trace(&path).expect("detected by its name");
        let read: Vec<(u64, u64, f64)> = workload
            .requests
            .iter()
            .map(|r| (r.object, r.size, r.at))
            .collect();
        assert_eq!(
            read,
            [(1, 100, 10.0), (u64::MAX - 1, 200, 11.0), (1, 100, 12.0)]
        );
        assert_eq!(workload.malformed_lines, 1, "the record cut short");
        let renamed = dir.path().join("trace.bin");
        std::fs::write(&renamed, &bytes).expect("write trace");
        let named =
            from_trace_as(&renamed, Some(TraceFormat::OracleGeneral)).expect("the format named");
        assert_eq!(named.requests, workload.requests);
        let compressed = dir.path().join("w01.oracleGeneral.zst");
        std::fs::write(&compressed, &bytes).expect("write trace");
        let error = from_trace(&compressed).expect_err("compressed").to_string();
        assert!(error.contains("zstd -d"), "{error}");
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_parsers() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..2_000 {
            let len = rng.random_range(0..120);
            let bytes: Vec<u8> = (0..len).map(|_| rng.random_range(0..=255u8)).collect();
            for format in [
                TraceFormat::AccessLog,
                TraceFormat::JsonLines,
                TraceFormat::Csv,
                TraceFormat::Twitter,
            ] {
                parse_trace(&bytes[..], format, "fuzz").expect("in-memory read");
            }
            parse_oracle_general(&bytes[..], "fuzz").expect("in-memory read");
        }
    }

    #[test]
    fn trace_files_are_read_by_extension_and_empty_ones_rejected() {
        let dir = tempfile::tempdir().expect("temp dir");
        let csv = dir.path().join("t.csv");
        std::fs::write(&csv, "0,/x,5\n0,/x,5\n").expect("write trace");
        assert_eq!(from_trace(&csv).expect("readable trace").requests.len(), 2);
        let json = dir.path().join("access.log");
        let line = r#"{"time":"2026-10-10T13:55:36Z","request_method":"GET","request_uri":"/x","status":200,"body_bytes_sent":5}"#;
        std::fs::write(&json, format!("{line}\n")).expect("write trace");
        let read = from_trace(&json).expect("a log starting with { is JSON lines");
        assert_eq!(read.requests[0].size, 5);
        let empty = dir.path().join("t.log");
        std::fs::write(&empty, "not a log line\n").expect("write trace");
        assert!(matches!(
            from_trace(&empty),
            Err(WorkloadError::EmptyTrace { malformed: 1, .. })
        ));
        assert!(matches!(
            from_trace(&dir.path().join("missing.log")),
            Err(WorkloadError::Trace { .. })
        ));
    }
}
