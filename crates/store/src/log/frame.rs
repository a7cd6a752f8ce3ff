//! Frames: the LSN, length and checksum around each record.
//!
//! The ring in shared memory and the log files hold the same bytes:
//!
//! ```text
//! +0  u64 LE lsn   this frame's own LSN (in the ring: stored last = "complete")
//! +8  u32 LE len   payload length
//! +12 u32 LE crc   CRC32C over bytes [0..12) of this header, then the payload
//! +16 payload, then zero bytes up to a multiple of 8
//! ```
//!
//! The next frame's LSN is this one's plus [`frame_size`]. Everything here is
//! pure: it checks bytes another process (or a disk) may have damaged and never
//! panics on them.

use std::fmt;

/// Bytes of a frame header (lsn, len, crc).
pub const FRAME_HEADER: usize = 16;

/// The largest payload a frame carries; a larger value is split into a group
/// of frames. Bounds what a reader allocates for one frame.
pub const MAX_RECORD: usize = 64 << 20;

/// Bytes a frame with a payload of `payload_len` bytes takes in the log.
pub fn frame_size(payload_len: usize) -> u64 {
    FRAME_HEADER as u64 + (payload_len as u64).div_ceil(8) * 8
}

/// The checksum stored in a frame: CRC32C over the lsn and len words, then
/// the payload.
pub fn frame_crc(lsn: u64, payload: &[u8]) -> u32 {
    let mut head = [0u8; 12];
    head[..8].copy_from_slice(&lsn.to_le_bytes());
    head[8..].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&head), payload)
}

/// The header's second word (len, crc) as bytes. The ring writes the payload
/// and this word first and the lsn word last, so a frame whose lsn word is
/// right is complete.
pub fn encode_header_tail(payload: &[u8], lsn: u64) -> [u8; 8] {
    debug_assert!(payload.len() <= MAX_RECORD);
    let mut word = [0u8; 8];
    word[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    word[4..].copy_from_slice(&frame_crc(lsn, payload).to_le_bytes());
    word
}

/// Appends the whole frame (header, payload, zero padding) to `out`.
pub fn encode_frame(lsn: u64, payload: &[u8], out: &mut Vec<u8>) {
    let size = frame_size(payload.len()) as usize;
    out.reserve(size);
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&encode_header_tail(payload, lsn));
    out.extend_from_slice(payload);
    let padding = size - FRAME_HEADER - payload.len();
    out.extend_from_slice(&[0u8; 8][..padding]);
}

/// The three words of a frame header, unchecked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// The frame's own LSN.
    pub lsn: u64,
    /// Payload length in bytes.
    pub len: u32,
    /// The stored checksum (see [`frame_crc`]).
    pub crc: u32,
}

/// Splits a frame header into its words; checks nothing.
pub fn decode_frame_header(b: &[u8; FRAME_HEADER]) -> FrameHeader {
    let word = |at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&b[at..at + 4]);
        u32::from_le_bytes(w)
    };
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&b[..8]);
    FrameHeader {
        lsn: u64::from_le_bytes(lsn),
        len: word(8),
        crc: word(12),
    }
}

/// Why bytes are not a valid frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The bytes end before the frame does (a torn write, or a short file).
    Truncated,
    /// The frame carries another LSN than its position says it must.
    BadLsn {
        /// The LSN in the frame.
        found: u64,
        /// The LSN its position implies.
        expected: u64,
    },
    /// The length word exceeds [`MAX_RECORD`].
    TooLong(u32),
    /// The checksum does not match the header and payload.
    BadCrc,
    /// A padding byte after the payload is not zero.
    BadPadding,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated => f.write_str("frame truncated (the bytes end inside it)"),
            FrameError::BadLsn { found, expected } => {
                write!(f, "frame has LSN {found} where LSN {expected} was expected")
            }
            FrameError::TooLong(len) => write!(
                f,
                "frame length {len} exceeds the largest record ({MAX_RECORD} bytes)"
            ),
            FrameError::BadCrc => f.write_str("frame checksum mismatch"),
            FrameError::BadPadding => f.write_str("frame padding is not zero"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Checks the frame at the start of `bytes`, which must carry `expect_lsn`.
/// Returns its header, its payload and its size in bytes.
pub fn parse_frame(bytes: &[u8], expect_lsn: u64) -> Result<(FrameHeader, &[u8], u64), FrameError> {
    let Some(head) = bytes.first_chunk::<FRAME_HEADER>() else {
        return Err(FrameError::Truncated);
    };
    let header = decode_frame_header(head);
    if header.lsn != expect_lsn {
        return Err(FrameError::BadLsn {
            found: header.lsn,
            expected: expect_lsn,
        });
    }
    let len = header.len as usize;
    if len > MAX_RECORD {
        return Err(FrameError::TooLong(header.len));
    }
    let size = frame_size(len);
    if (bytes.len() as u64) < size {
        return Err(FrameError::Truncated);
    }
    let payload = &bytes[FRAME_HEADER..FRAME_HEADER + len];
    if frame_crc(header.lsn, payload) != header.crc {
        return Err(FrameError::BadCrc);
    }
    if bytes[FRAME_HEADER + len..size as usize]
        .iter()
        .any(|&b| b != 0)
    {
        return Err(FrameError::BadPadding);
    }
    Ok((header, payload, size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(lsn: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(lsn, payload, &mut out);
        out
    }

    #[test]
    fn sizes_round_up_to_eight() {
        assert_eq!(frame_size(0), 16);
        assert_eq!(frame_size(1), 24);
        assert_eq!(frame_size(8), 24);
        assert_eq!(frame_size(9), 32);
        assert_eq!(frame(0, b"abc").len(), 24);
    }

    #[test]
    fn layout_matches_the_format() {
        let bytes = frame(0x0102, b"hello");
        assert_eq!(&bytes[..8], &0x0102u64.to_le_bytes());
        assert_eq!(&bytes[8..12], &5u32.to_le_bytes());
        let mut covered = bytes[..12].to_vec();
        covered.extend_from_slice(b"hello");
        assert_eq!(&bytes[12..16], &crc32c::crc32c(&covered).to_le_bytes());
        assert_eq!(&bytes[16..21], b"hello");
        assert_eq!(&bytes[21..], &[0, 0, 0]);
        assert_eq!(&bytes[8..16], &encode_header_tail(b"hello", 0x0102));
        let header = decode_frame_header(bytes[..16].try_into().unwrap());
        assert_eq!((header.lsn, header.len), (0x0102, 5));
    }

    #[test]
    fn each_check_in_order() {
        let good = frame(64, b"payload!x");
        assert_eq!(parse_frame(&good[..15], 64), Err(FrameError::Truncated));
        assert_eq!(
            parse_frame(&good, 72),
            Err(FrameError::BadLsn {
                found: 64,
                expected: 72
            })
        );
        let mut long = good.clone();
        long[8..12].copy_from_slice(&(MAX_RECORD as u32 + 1).to_le_bytes());
        assert_eq!(
            parse_frame(&long, 64),
            Err(FrameError::TooLong(MAX_RECORD as u32 + 1))
        );
        assert_eq!(
            parse_frame(&good[..good.len() - 1], 64),
            Err(FrameError::Truncated)
        );
        let mut flipped = good.clone();
        flipped[18] ^= 0x10;
        assert_eq!(parse_frame(&flipped, 64), Err(FrameError::BadCrc));
        let mut padded = good.clone();
        *padded.last_mut().unwrap() = 1;
        assert_eq!(parse_frame(&padded, 64), Err(FrameError::BadPadding));
        let (header, payload, size) = parse_frame(&good, 64).unwrap();
        assert_eq!((header.len, payload, size), (9, &b"payload!x"[..], 32));
    }

    #[test]
    fn trailing_bytes_are_not_part_of_the_frame() {
        let mut two = frame(0, b"a");
        let first = two.len() as u64;
        encode_frame(first, b"bb", &mut two);
        let (_, payload, size) = parse_frame(&two, 0).unwrap();
        assert_eq!((payload, size), (&b"a"[..], first));
        let (_, payload, _) = parse_frame(&two[size as usize..], first).unwrap();
        assert_eq!(payload, b"bb");
    }

    #[test]
    fn errors_read_well() {
        assert_eq!(
            FrameError::BadLsn {
                found: 1,
                expected: 2
            }
            .to_string(),
            "frame has LSN 1 where LSN 2 was expected"
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..96), lsn: u64) {
            let _ = parse_frame(&bytes, lsn);
            let header_lsn = bytes.first_chunk::<8>().map_or(0, |w| u64::from_le_bytes(*w));
            let _ = parse_frame(&bytes, header_lsn);
        }

        #[test]
        fn encode_then_parse_round_trips(
            lsn: u64,
            payload in proptest::collection::vec(any::<u8>(), 0..300),
            extra in proptest::collection::vec(any::<u8>(), 0..20),
        ) {
            let mut bytes = frame(lsn, &payload);
            prop_assert_eq!(bytes.len() as u64, frame_size(payload.len()));
            prop_assert_eq!(bytes.len() % 8, 0);
            bytes.extend_from_slice(&extra);
            let (header, got, size) = parse_frame(&bytes, lsn).unwrap();
            prop_assert_eq!(got, &payload[..]);
            prop_assert_eq!(header.len as usize, payload.len());
            prop_assert_eq!(size, frame_size(payload.len()));
        }

        #[test]
        fn any_flipped_bit_is_caught(
            lsn in 0u64..1 << 40,
            payload in proptest::collection::vec(any::<u8>(), 1..100),
            bit in any::<proptest::sample::Index>(),
        ) {
            let mut bytes = frame(lsn, &payload);
            let bit = bit.index(bytes.len() * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(parse_frame(&bytes, lsn).is_err());
        }
    }
}
