//! The chunked body after a request head (RFC 9112 §7.1), followed byte by byte as
//! hyper's decoder reads it, so the scanner knows where the next head starts.

/// The chunked body is malformed; hyper will fail the request and close.
pub(super) struct Malformed;

/// Where a chunked body is, following hyper's `ChunkedState` byte for byte.
#[derive(Default)]
pub(super) struct Chunked {
    pub(super) step: ChunkStep,
    /// The chunk size being read, then the data bytes left in the chunk.
    pub(super) size: u64,
}

/// The part of a chunked body the next byte belongs to (hyper's `ChunkedState`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(super) enum ChunkStep {
    #[default]
    Start,
    Size,
    SizeLws,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    EndCr,
    Trailer,
    TrailerLf,
    EndLf,
}

impl Chunked {
    /// Takes one byte; `Ok(true)` when it ended the body.
    pub(super) fn advance(&mut self, byte: u8) -> Result<bool, Malformed> {
        use ChunkStep::*;
        self.step = match (self.step, byte) {
            (Start, b) => {
                self.size = u64::from(hex_digit(b).ok_or(Malformed)?);
                Size
            }
            (Size, b'\t' | b' ') | (SizeLws, b'\t' | b' ') => SizeLws,
            (Size | SizeLws, b';') => Extension,
            (Size | SizeLws, b'\r') | (Extension, b'\r') => SizeLf,
            (Size, b) => {
                let digit = hex_digit(b).ok_or(Malformed)?;
                self.size = (self.size.checked_mul(16))
                    .and_then(|s| s.checked_add(u64::from(digit)))
                    .ok_or(Malformed)?;
                Size
            }
            (Extension, b'\n') => return Err(Malformed),
            (Extension, _) => Extension,
            (SizeLf, b'\n') if self.size == 0 => EndCr,
            (SizeLf, b'\n') => Data,
            (Data, _) => {
                self.size = self.size.saturating_sub(1);
                if self.size == 0 { DataCr } else { Data }
            }
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => Start,
            (EndCr, b'\r') => EndLf,
            (EndCr, _) => Trailer,
            (Trailer, b'\r') => TrailerLf,
            (Trailer, _) => Trailer,
            (TrailerLf, b'\n') => EndCr,
            (EndLf, b'\n') => return Ok(true),
            (SizeLws | SizeLf | DataCr | DataLf | TrailerLf | EndLf, _) => {
                return Err(Malformed);
            }
        };
        Ok(false)
    }
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}
