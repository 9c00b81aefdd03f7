//! The metadata payload of a slot: an [`EntryMeta`] as bytes (layout in the
//! parent module's docs).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::{EntryError, EntryMeta, Reader};

/// Encodes the metadata payload of a slot; refuses request credentials.
pub(crate) fn encode_meta(meta: &EntryMeta) -> Result<Vec<u8>, EntryError> {
    for name in [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION] {
        if meta.request_headers.contains_key(name) {
            return Err(EntryError::Credentials);
        }
    }
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&unix_millis(meta.request_time).to_le_bytes());
    out.extend_from_slice(&unix_millis(meta.response_time).to_le_bytes());
    out.extend_from_slice(&meta.status.as_u16().to_le_bytes());
    encode_headers(&mut out, &meta.response_headers)?;
    encode_headers(&mut out, &meta.request_headers)?;
    if !meta.tags.is_empty() || meta.purged.is_some() {
        encode_tags(&mut out, &meta.tags)?;
        // A purge at the epoch itself would read back as none: it is stored as 1 ms.
        let purged = meta.purged.map_or(0, |at| unix_millis(at).max(1));
        out.extend_from_slice(&purged.to_le_bytes());
    }
    Ok(out)
}

/// The tag section's list: a count, then each tag's length and bytes.
fn encode_tags(out: &mut Vec<u8>, tags: &[String]) -> Result<(), EntryError> {
    let count = u32::try_from(tags.len()).map_err(|_| EntryError::Invalid("tag count"))?;
    out.extend_from_slice(&count.to_le_bytes());
    for tag in tags {
        let len = u16::try_from(tag.len()).map_err(|_| EntryError::Invalid("tag length"))?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(tag.as_bytes());
    }
    Ok(())
}

/// Decodes the optional tag section (see the parent module's docs).
fn decode_tags(r: &mut Reader<'_>) -> Result<(Vec<String>, Option<SystemTime>), &'static str> {
    if r.is_empty() {
        return Ok((Vec::new(), None));
    }
    let truncated = |_| "tag list truncated";
    let count = r.u32().map_err(truncated)?;
    // Not preallocated from `count`: garbage could claim billions.
    let mut tags = Vec::new();
    for _ in 0..count {
        let len = r.u16().map_err(truncated)? as usize;
        let bytes = r.take(len).map_err(truncated)?;
        tags.push(String::from_utf8(bytes.to_vec()).map_err(|_| "tag not UTF-8")?);
    }
    let purged = match r.u64().map_err(truncated)? {
        0 => None,
        ms => Some(from_unix_millis(ms)?),
    };
    Ok((tags, purged))
}

fn encode_headers(out: &mut Vec<u8>, map: &HeaderMap) -> Result<(), EntryError> {
    let count = u32::try_from(map.len()).map_err(|_| EntryError::Invalid("header count"))?;
    out.extend_from_slice(&count.to_le_bytes());
    for (name, value) in map {
        // http caps names below 64 KiB; values have no cap, hence the checks.
        let name_len =
            u16::try_from(name.as_str().len()).map_err(|_| EntryError::Invalid("header name"))?;
        let value_len =
            u32::try_from(value.len()).map_err(|_| EntryError::Invalid("header value"))?;
        out.extend_from_slice(&name_len.to_le_bytes());
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(&value_len.to_le_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    Ok(())
}

/// Decodes a slot's payload. The header values are slices of one copy of it, so
/// that copying the header map for a response (once per hit) counts references on
/// one shared buffer rather than on one allocation per value: on a cache of many
/// objects, each of those was a cache miss.
pub(super) fn decode_meta(payload: &[u8]) -> Result<EntryMeta, &'static str> {
    let shared = Bytes::copy_from_slice(payload);
    let mut r = Reader::new(payload);
    let truncated = |_| "metadata truncated";
    let request_time = from_unix_millis(r.u64().map_err(truncated)?)?;
    let response_time = from_unix_millis(r.u64().map_err(truncated)?)?;
    let status = StatusCode::from_u16(r.u16().map_err(truncated)?).map_err(|_| "status code")?;
    let response_headers = decode_headers(&mut r, &shared)?;
    let request_headers = decode_headers(&mut r, &shared)?;
    let (tags, purged) = decode_tags(&mut r)?;
    if !r.is_empty() {
        return Err("trailing bytes after metadata");
    }
    Ok(EntryMeta {
        request_time,
        response_time,
        status,
        response_headers,
        request_headers,
        tags,
        purged,
    })
}

/// Decodes a header list from `r`, which reads `shared`'s bytes.
fn decode_headers(r: &mut Reader<'_>, shared: &Bytes) -> Result<HeaderMap, &'static str> {
    let truncated = |_| "header list truncated";
    let count = r.u32().map_err(truncated)?;
    // Not preallocated from `count`: garbage could claim billions.
    let mut map = HeaderMap::new();
    for _ in 0..count {
        let name_len = r.u16().map_err(truncated)? as usize;
        let name = HeaderName::from_bytes(r.take(name_len).map_err(truncated)?)
            .map_err(|_| "header name")?;
        let value_len = r.u32().map_err(truncated)? as usize;
        let start = r.position();
        r.take(value_len).map_err(truncated)?;
        let value = HeaderValue::from_maybe_shared(shared.slice(start..start + value_len))
            .map_err(|_| "header value")?;
        // `append` panics past http's size limit; `try_append` reports it.
        map.try_append(name, value)
            .map_err(|_| "too many headers")?;
    }
    Ok(map)
}

/// Times before the epoch are stored as the epoch (a proxy never sees them).
fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn from_unix_millis(ms: u64) -> Result<SystemTime, &'static str> {
    UNIX_EPOCH
        .checked_add(Duration::from_millis(ms))
        .ok_or("time out of range")
}
