//! The framing state machine behind the head guard: follows HTTP/1 framing over a
//! connection's inbound bytes, collecting and judging each request head and following
//! the body after it. Pure: no I/O (the guard in [`super`] does the reading).

use std::mem::MaybeUninit;

use crate::hygiene::{ConnectionToken, REJECTION_FIELD, Rejection};

use super::Limits;
use chunked::{ChunkStep, Chunked, Malformed};

/// The HTTP/2 connection preface a prior-knowledge (h2c) client opens with (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The framing state machine over a connection's inbound bytes. Pure: no I/O.
pub(crate) struct Scanner {
    state: State,
    limits: Limits,
    token: ConnectionToken,
}

enum State {
    /// Collecting a head; the first `scanned` bytes of `buf` are known not to end it.
    Head { buf: Vec<u8>, scanned: usize },
    /// Inside a body of known length: this many bytes left (never zero).
    Length(u64),
    /// Inside a chunked body.
    Chunked(Chunked),
    /// No longer inspecting; `linger` when hyper is about to refuse what it reads.
    Passthrough { linger: bool },
    /// A bad head was replaced; everything after it is discarded.
    Rejected,
}

impl State {
    fn head() -> State {
        State::Head {
            buf: Vec::new(),
            scanned: 0,
        }
    }
}

/// What one step of [`Scanner::feed`] did with its input.
enum Step {
    /// Used this many bytes of the input.
    Used(usize),
    /// Used all of the input, and these bytes after a completed head must be fed again.
    Leftover(Vec<u8>),
}

/// What a complete head asks for.
enum Verdict {
    Reject(Rejection),
    Forward {
        framing: Framing,
        /// The connection may change protocol after this message (CONNECT, Upgrade).
        stop: bool,
    },
}

/// How the body after a head is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
    /// hyper will refuse the head (a transfer coding other than a final `chunked`).
    Refused,
}

impl Scanner {
    /// A scanner at the start of a connection.
    pub(crate) fn new(token: ConnectionToken, limits: Limits) -> Scanner {
        Scanner {
            state: State::head(),
            limits,
            token,
        }
    }

    /// Consumes `input`, appending what hyper may read to `out`.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut carried: Vec<u8>;
        let mut rest = input;
        while !rest.is_empty() {
            match self.step(rest, out) {
                Step::Used(n) => rest = &rest[n..],
                Step::Leftover(bytes) => {
                    carried = bytes;
                    rest = &carried;
                }
            }
        }
    }

    /// The client closed its side: releases a partial head (hyper reports it incomplete).
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        if let State::Head { buf, .. } = &mut self.state {
            out.append(buf);
            self.state = State::Passthrough { linger: false };
        }
    }

    /// How many of the next bytes pass through unchanged (body data), so they can be
    /// read straight into hyper's buffer.
    pub(crate) fn passing(&self) -> u64 {
        match &self.state {
            State::Passthrough { .. } => u64::MAX,
            State::Length(left) => *left,
            State::Chunked(chunked) if chunked.step == ChunkStep::Data => chunked.size,
            _ => 0,
        }
    }

    /// Records that `n` (at most [`Scanner::passing`]) bytes passed through unchanged.
    pub(crate) fn pass(&mut self, n: usize) {
        let n = n as u64;
        match &mut self.state {
            State::Length(left) => {
                *left = left.saturating_sub(n);
                if *left == 0 {
                    self.state = State::head();
                }
            }
            State::Chunked(chunked) if chunked.step == ChunkStep::Data => {
                chunked.size = chunked.size.saturating_sub(n);
                if chunked.size == 0 {
                    chunked.step = ChunkStep::DataCr;
                }
            }
            _ => {}
        }
    }

    /// Some bytes of a head have come, but not all of it.
    pub(crate) fn holds_partial_head(&self) -> bool {
        matches!(&self.state, State::Head { buf, .. } if !buf.is_empty())
    }

    /// A bad head was replaced and the connection is closing.
    pub(crate) fn is_rejected(&self) -> bool {
        matches!(self.state, State::Rejected)
    }

    /// The connection ends with a refusal, so its close should linger.
    pub(crate) fn wants_linger(&self) -> bool {
        matches!(
            self.state,
            State::Rejected | State::Passthrough { linger: true }
        )
    }

    fn step(&mut self, input: &[u8], out: &mut Vec<u8>) -> Step {
        let passing = usize::try_from(self.passing()).map_or(input.len(), |p| p.min(input.len()));
        if passing > 0 {
            out.extend_from_slice(&input[..passing]);
            self.pass(passing);
            return Step::Used(passing);
        }
        match &mut self.state {
            State::Rejected => Step::Used(input.len()),
            State::Chunked(chunked) => {
                // Size lines, CRLFs and trailers: one byte at a time, as hyper reads them.
                out.push(input[0]);
                match chunked.advance(input[0]) {
                    Ok(false) => {}
                    Ok(true) => self.state = State::head(),
                    Err(Malformed) => self.state = State::Passthrough { linger: true },
                }
                Step::Used(1)
            }
            // The usual case: a whole head in one read, judged where it lies.
            State::Head { buf, scanned } if buf.is_empty() && !may_be_h2_preface(input) => {
                match judge(input, &self.limits) {
                    Judged::Complete {
                        len,
                        verdict,
                        minor,
                    } => {
                        self.on_complete_head(&input[..len], verdict, minor, out);
                        Step::Used(len)
                    }
                    Judged::Partial => {
                        buf.extend_from_slice(input);
                        *scanned = input.len();
                        Step::Used(input.len())
                    }
                    Judged::Refused => {
                        out.extend_from_slice(input);
                        self.state = State::Passthrough { linger: true };
                        Step::Used(input.len())
                    }
                }
            }
            State::Head { buf, .. } => {
                buf.extend_from_slice(input);
                match self.on_head_bytes(out) {
                    Some(leftover) => Step::Leftover(leftover),
                    None => Step::Used(input.len()),
                }
            }
            // Only reached with nothing left to pass (`pass` ends a finished body
            // itself); kept total instead of trusted.
            State::Length(_) | State::Passthrough { .. } => {
                self.state = State::head();
                Step::Used(0)
            }
        }
    }

    /// Decides on the head collected so far; returns the bytes after a completed head.
    fn on_head_bytes(&mut self, out: &mut Vec<u8>) -> Option<Vec<u8>> {
        let State::Head { buf, scanned } = &mut self.state else {
            return None;
        };
        if buf.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(buf) {
            // Possibly HTTP/2 prior knowledge: wait until the preface is whole or broken.
            return None;
        }
        if buf.starts_with(H2_PREFACE) {
            return self.give_up(false, out);
        }
        // Like hyper, re-parse only when the new bytes may end the head: a client
        // sending one byte at a time must not cost a full parse per byte.
        if *scanned > 0 && !may_end_head(buf, *scanned) {
            *scanned = buf.len();
            return if buf.len() >= self.limits.max_head_bytes {
                self.give_up(true, out)
            } else {
                None
            };
        }
        let (len, verdict, minor) = match judge(buf, &self.limits) {
            Judged::Complete {
                len,
                verdict,
                minor,
            } => (len, verdict, minor),
            Judged::Partial => {
                *scanned = buf.len();
                return None;
            }
            Judged::Refused => return self.give_up(true, out),
        };
        let mut head = std::mem::take(buf);
        let leftover = head.split_off(len);
        self.on_complete_head(&head, verdict, minor, out);
        // After a refusal or a protocol change the rest is discarded or passed as is:
        // the state set above does that to it.
        (!leftover.is_empty()).then_some(leftover)
    }

    /// Acts on a complete head: passes it to hyper (`out`), or the head that makes
    /// hyper answer 400 in its place, and follows the framing of the body after it.
    fn on_complete_head(&mut self, head: &[u8], verdict: Verdict, minor: u8, out: &mut Vec<u8>) {
        self.state = match verdict {
            Verdict::Reject(reason) => {
                self.write_rejection(reason, minor, out);
                State::Rejected
            }
            Verdict::Forward { framing, stop } => {
                out.extend_from_slice(head);
                match framing {
                    _ if stop || framing == Framing::Refused => State::Passthrough {
                        linger: framing == Framing::Refused,
                    },
                    Framing::Length(0) | Framing::Refused => State::head(),
                    Framing::Length(n) => State::Length(n),
                    Framing::Chunked => State::Chunked(Chunked::default()),
                }
            }
        };
    }

    /// Stops inspecting: releases the collected bytes and passes all later ones through.
    fn give_up(&mut self, linger: bool, out: &mut Vec<u8>) -> Option<Vec<u8>> {
        if let State::Head { buf, .. } = &mut self.state {
            out.append(buf);
        }
        self.state = State::Passthrough { linger };
        None
    }

    /// The head hyper parses instead of a rejected one: `handle` answers it 400.
    fn write_rejection(&self, reason: Rejection, minor: u8, out: &mut Vec<u8>) {
        out.extend_from_slice(b"GET / HTTP/1.");
        out.push(if minor == 0 { b'0' } else { b'1' });
        // `.invalid` (RFC 6761) can never name a real host.
        out.extend_from_slice(b"\r\nhost: secondhit.invalid\r\n");
        out.extend_from_slice(REJECTION_FIELD.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(self.token.as_bytes());
        out.push(b' ');
        out.extend_from_slice(reason.as_str().as_bytes());
        out.extend_from_slice(b"\r\nconnection: close\r\n\r\n");
    }
}

/// Header fields parsed on the stack: hyper's own default limit, and the size of the
/// array it parses into.
const STACK_FIELDS: usize = 100;

/// What the bytes of a head collected so far say.
enum Judged {
    /// Not the whole head yet.
    Partial,
    /// Too large, too many fields, or malformed: hyper answers 431 or 400 and closes.
    Refused,
    /// A whole head of `len` bytes, and what it asks for.
    Complete {
        len: usize,
        verdict: Verdict,
        minor: u8,
    },
}

/// Parses the head at the start of `bytes` within `limits`. The fields go into an
/// uninitialised array on the stack, as hyper's do: a zeroed vector of `max_headers`
/// fields was a 3.2 KiB allocation and fill per request at the default limit.
fn judge(bytes: &[u8], limits: &Limits) -> Judged {
    let mut on_stack = [const { MaybeUninit::uninit() }; STACK_FIELDS];
    let mut on_heap = Vec::new();
    let fields = if limits.max_headers <= STACK_FIELDS {
        &mut on_stack[..limits.max_headers]
    } else {
        on_heap.resize_with(limits.max_headers, MaybeUninit::uninit);
        &mut on_heap[..]
    };
    let mut request = httparse::Request::new(&mut []);
    match request.parse_with_uninit_headers(bytes, fields) {
        Ok(httparse::Status::Complete(len)) if len <= limits.max_head_bytes => Judged::Complete {
            len,
            verdict: inspect(&request),
            minor: request.version.unwrap_or(1),
        },
        Ok(httparse::Status::Partial) if bytes.len() < limits.max_head_bytes => Judged::Partial,
        Ok(_) | Err(_) => Judged::Refused,
    }
}

/// Whether `input`, the first bytes of a head, is or may become the HTTP/2 preface
/// (which `Scanner::on_head_bytes` waits for whole, then passes on).
fn may_be_h2_preface(input: &[u8]) -> bool {
    let n = input.len().min(H2_PREFACE.len());
    input[..n] == H2_PREFACE[..n]
}

/// Reads the framing fields of a complete head the way hyper's `Server::parse` does.
fn inspect(request: &httparse::Request<'_, '_>) -> Verdict {
    let mut length: Option<u64> = None;
    let mut length_problem: Option<Rejection> = None;
    let mut any_length = false;
    // hyper decides on the last Transfer-Encoding line.
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut upgrade = false;
    for header in request.headers.iter() {
        let name = header.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            any_length = true;
            match (decimal(header.value), length) {
                (None, _) => {
                    length_problem.get_or_insert(Rejection::InvalidLength);
                }
                (Some(n), Some(previous)) if n != previous => {
                    length_problem.get_or_insert(Rejection::ConflictingLength);
                }
                (Some(n), _) => length = Some(n),
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = Some(header.value);
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade = true;
        }
    }
    if transfer_encoding.is_some() && any_length {
        return Verdict::Reject(Rejection::LengthWithTransferEncoding);
    }
    if let Some(problem) = length_problem {
        return Verdict::Reject(problem);
    }
    let http_11 = request.version == Some(1);
    let framing = match transfer_encoding {
        // hyper refuses Transfer-Encoding in HTTP/1.0, and any final coding but chunked.
        Some(value) if http_11 && final_coding_is_chunked(value) => Framing::Chunked,
        Some(_) => Framing::Refused,
        None => Framing::Length(length.unwrap_or(0)),
    };
    Verdict::Forward {
        framing,
        stop: request.method == Some("CONNECT") || (upgrade && http_11),
    }
}

/// A `Content-Length` value: decimal digits only, optional whitespace around them.
fn decimal(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// hyper's `is_chunked_`: the value is visible ASCII and its last coding is `chunked`.
fn final_coding_is_chunked(value: &[u8]) -> bool {
    let visible = value
        .iter()
        .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b));
    let Ok(text) = std::str::from_utf8(value) else {
        return false;
    };
    visible
        && text
            .rsplit(',')
            .next()
            .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"))
}

/// hyper's `is_complete_fast`: whether the bytes after `scanned` may hold a head's end.
fn may_end_head(buf: &[u8], scanned: usize) -> bool {
    let tail = &buf[scanned.saturating_sub(3)..];
    tail.windows(2).any(|w| w == b"\n\n") || tail.windows(3).any(|w| w == b"\n\r\n")
}

mod chunked;
#[cfg(test)]
mod tests;
