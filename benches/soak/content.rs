//! What the soak's origin serves, and how a client checks it: every body names the URL,
//! version and variant it was made for and is otherwise derived from them, so the
//! checker can regenerate the exact bytes any response (or a range of one) must carry.

use xxhash_rust::xxh3::xxh3_64;

/// How many distinct objects the origin has.
pub(crate) const OBJECTS: u64 = 4000;
/// How many tag groups the objects fall into (`Surrogate-Key: g<n>`).
pub(crate) const GROUPS: u64 = 16;
/// The languages a varying object is offered in.
pub(crate) const LANGUAGES: [&str; 3] = ["en", "fr", "de"];

/// What the origin does with object `n` beside serving it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Traits {
    /// `Vary: Accept-Language`.
    pub by_language: bool,
    /// `Vary: Accept-Encoding`, with a `Content-Encoding: deflate` variant.
    pub by_encoding: bool,
    /// Every 200 sets the requester's session cookie (never storable).
    pub sets_cookie: bool,
    /// Every 304 sets the requester's session cookie (refreshing it on revalidation).
    pub refreshes_cookie: bool,
    /// `Cache-Control: private`, the body names the requester.
    pub private: bool,
}

impl Traits {
    /// The traits of object `n`.
    pub(crate) fn of(n: u64) -> Traits {
        Traits {
            by_language: n % 7 == 1,
            by_encoding: n % 11 == 2,
            sets_cookie: n % 13 == 3,
            refreshes_cookie: n % 5 == 4,
            private: n % 17 == 5,
        }
    }
}

/// The size of object `n`'s body: 1 KiB to about 200 KiB, most small.
pub(crate) fn size_of(n: u64) -> usize {
    let roll = xxh3_64(&n.to_le_bytes()) % 1000;
    match roll {
        0..=699 => 1024 + (roll as usize * 7),
        700..=949 => 16 * 1024 + (roll as usize * 40),
        _ => 100 * 1024 + (roll as usize * 100),
    }
}

/// The representation a response claims to be: its URL's object, version and variant,
/// and the client it was made for (`-` when shared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Representation {
    /// The object number (`/o/<n>`).
    pub object: u64,
    /// The origin's version of it.
    pub version: u64,
    /// The variant: `<lang>` or `<encoding>` or `-`.
    pub variant: String,
    /// The client a private response was made for, or `-`.
    pub client: String,
}

impl Representation {
    /// The entity tag naming this representation.
    pub(crate) fn etag(&self) -> String {
        format!(
            "\"{}.{}.{}.{}\"",
            self.object, self.version, self.variant, self.client
        )
    }

    /// Parses an entity tag made by [`Representation::etag`].
    pub(crate) fn from_etag(etag: &str) -> Option<Representation> {
        let inner = etag.trim_start_matches("W/").trim_matches('"');
        let mut parts = inner.splitn(4, '.');
        Some(Representation {
            object: parts.next()?.parse().ok()?,
            version: parts.next()?.parse().ok()?,
            variant: parts.next()?.to_owned(),
            client: parts.next()?.to_owned(),
        })
    }

    /// The whole body of this representation.
    pub(crate) fn body(&self) -> Vec<u8> {
        let head = format!("{}\n", self.etag());
        let len = size_of(self.object).max(head.len());
        let mut body = Vec::with_capacity(len);
        body.extend_from_slice(head.as_bytes());
        let mut state = xxh3_64(head.as_bytes()) | 1;
        while body.len() < len {
            // xorshift: cheap, and any wrong byte shows.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            body.extend_from_slice(&state.to_le_bytes());
        }
        body.truncate(len);
        body
    }
}

/// The object number of a soak path `/o/<n>`.
pub(crate) fn object_of(path: &str) -> Option<u64> {
    path.strip_prefix("/o/")?.parse().ok()
}
