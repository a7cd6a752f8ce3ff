//! Redis's RDB encoding of one value: what DUMP writes and RESTORE reads,
//! and what snapshots or a replication stream in Redis's format would carry
//! per key.
//!
//! A DUMP payload is the value's type byte, its RDB body, the RDB version
//! (2 bytes, little endian; 10 for Redis 7.0) and a CRC-64 (Redis's Jones
//! polynomial) of everything before it (8 bytes, little endian).
//!
//! [`encode`] writes the encodings Redis 7.0 writes (listpacks, quicklist 2,
//! intsets, stream listpacks 2) without compressing. [`decode`] reads every
//! encoding Redis 7.0 loads for strings, lists, sets, hashes, sorted sets
//! and streams (plain, ziplist, zipmap, intset, listpack, quicklist 1 and 2,
//! stream listpacks 1 to 3, LZF-compressed strings) and
//! refuses any payload it cannot read whole: every length is checked against
//! the bytes left before anything is allocated for it, so a corrupt or
//! hostile payload costs at most a bounded multiple of its own size.

mod decode;
mod encode;
mod intset;
mod listpack;
mod lzf;
mod ziplist;

use store::StreamId;

pub use decode::{decode, decode_functions};
pub use encode::encode;

/// RDB's opcode for one function library (its code follows as a string).
pub const OPCODE_FUNCTION2: u8 = 245;

/// A FUNCTION DUMP payload of these library codes (Redis's format: each
/// library as the function opcode and its code, then the footer).
pub fn encode_functions(codes: &[Vec<u8>]) -> Vec<u8> {
    let mut body = Vec::new();
    for code in codes {
        body.push(OPCODE_FUNCTION2);
        encode::put_string(&mut body, code);
    }
    seal(body)
}

/// The RDB version DUMP writes and the newest RESTORE accepts (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;

/// A value as RDB carries it, in the order the payload gives it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    String(Vec<u8>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set's members (distinct).
    Set(Vec<Vec<u8>>),
    /// A hash's fields and values (distinct fields).
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A sorted set's members and scores (distinct members, no NaN).
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A stream: entries, counters, consumer groups.
    Stream(Box<StreamValue>),
}

/// A stream as RDB carries it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamValue {
    /// Live entries in ID order, each with its field/value pairs (flat).
    pub entries: Vec<(StreamId, Vec<Vec<u8>>)>,
    /// The last ID generated.
    pub last_id: StreamId,
    /// The largest deleted ID.
    pub max_deleted: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// The consumer groups.
    pub groups: Vec<StreamGroupValue>,
}

/// A consumer group as RDB carries it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamGroupValue {
    /// Its name.
    pub name: Vec<u8>,
    /// The last ID delivered.
    pub last_id: StreamId,
    /// Its read counter (None: unknown).
    pub entries_read: Option<u64>,
    /// Pending entries: ID, delivery time (ms), delivery count.
    pub pending: Vec<(StreamId, u64, u64)>,
    /// Consumers: name, seen time (ms), the IDs they own.
    pub consumers: Vec<(Vec<u8>, u64, Vec<StreamId>)>,
}

/// Why a payload was refused, as RESTORE reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// Too short, a version newer than [`RDB_VERSION`], or a CRC mismatch.
    VersionOrChecksum,
    /// The checksum holds but the value cannot be read (malformed, empty,
    /// or a type shoal does not keep: modules).
    BadFormat,
}

/// The CRC-64 Redis puts in DUMP payloads and RDB files.
const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// The bytes of a DUMP footer: version and checksum.
const FOOTER: usize = 10;

/// Checks a payload's footer: its body (type byte and value) when the
/// version is one Redis 7.0 loads and the checksum matches.
pub fn verify(payload: &[u8]) -> Result<&[u8], PayloadError> {
    if payload.len() < FOOTER {
        return Err(PayloadError::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - FOOTER);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return Err(PayloadError::VersionOrChecksum);
    }
    let crc = CRC64.checksum(&payload[..payload.len() - 8]);
    if crc.to_le_bytes() != footer[2..] {
        return Err(PayloadError::VersionOrChecksum);
    }
    Ok(body)
}

/// Appends the footer (version, checksum) to a payload's body.
fn seal(body: Vec<u8>) -> Vec<u8> {
    seal_as(body, RDB_VERSION)
}

/// Appends a footer of RDB version `version` and the checksum.
fn seal_as(mut body: Vec<u8>, version: u16) -> Vec<u8> {
    body.extend_from_slice(&version.to_le_bytes());
    let crc = CRC64.checksum(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// Redis's `string2ll` on a value: the integer a canonical decimal string
/// stands for (no sign but `-`, no leading zeros, no spaces, in i64).
fn canonical_int(s: &[u8]) -> Option<i64> {
    store::parse_i64(s)
}

/// A fuzzing harness: `decode` must refuse or accept any bytes without
/// panicking, and whatever it accepts must survive a round trip through
/// [`encode`]. The fuzz target `rdb_value` and the engine's tests call it.
pub mod fuzzing {
    use super::*;

    /// Feeds `data` to the decoder twice: as it is (almost always refused
    /// by the checksum) and sealed with a valid footer, so that the body
    /// decoder sees arbitrary bytes. Panics if an invariant breaks.
    pub fn fuzz_value(data: &[u8]) {
        if let Ok(v) = decode(data) {
            check_round_trip(&v);
        }
        let sealed = seal(data.to_vec());
        match decode(&sealed) {
            Ok(v) => check_round_trip(&v),
            Err(e) => assert_eq!(e, PayloadError::BadFormat, "a sealed payload's error"),
        }
    }

    /// A decoded value is well formed, and encodes to a payload that
    /// decodes to the same value (up to order where the type has none).
    pub fn check_round_trip(v: &Value) {
        let again = decode(&encode(v)).expect("an encoded value decodes");
        assert_eq!(normalized(&again), normalized(v), "round trip");
    }

    /// The value with sets and hashes sorted (their order is not kept)
    /// and sorted sets in score order.
    pub fn normalized(v: &Value) -> Value {
        match v {
            Value::Set(m) => {
                let mut m = m.clone();
                m.sort();
                Value::Set(m)
            }
            Value::Hash(p) => {
                let mut p = p.clone();
                p.sort();
                Value::Hash(p)
            }
            Value::ZSet(p) => {
                let mut p = p.clone();
                p.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                Value::ZSet(p)
            }
            other => other.clone(),
        }
    }

    /// `body` with a valid footer: a payload whose checksum holds.
    pub fn sealed(body: &[u8]) -> Vec<u8> {
        seal(body.to_vec())
    }

    /// `body` with a valid checksum under RDB version `version`.
    pub fn sealed_as(body: &[u8], version: u16) -> Vec<u8> {
        seal_as(body.to_vec(), version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_redis_crc64_jones() {
        // Redis's crc64.c self-test value.
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn footer_checks_version_and_crc() {
        let p = encode(&Value::String(b"bar".to_vec()));
        assert_eq!(verify(&p).unwrap(), b"\x00\x03bar");
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert_eq!(verify(&bad), Err(PayloadError::VersionOrChecksum));
        let newer = seal_as(p[..p.len() - FOOTER].to_vec(), 11);
        assert_eq!(verify(&newer), Err(PayloadError::VersionOrChecksum));
        let older = seal_as(p[..p.len() - FOOTER].to_vec(), 9);
        assert_eq!(verify(&older).unwrap(), b"\x00\x03bar");
        assert_eq!(verify(b"short"), Err(PayloadError::VersionOrChecksum));
    }
}
