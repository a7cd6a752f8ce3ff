//! memcached's UDP frame header: 8 bytes before each datagram's payload
//! (request id, sequence number, datagram count, reserved; big-endian).
//!
//! As in memcached 1.6: a request is one datagram (a count other than 1 is
//! dropped), its payload is text or binary protocol, and the reply is cut
//! into datagrams of at most 1400 bytes, header included, numbered from 0
//! and each carrying the total, so that a client can put them back in order.
//!
//! ```
//! use proto::memcache::udp;
//!
//! let d = [0, 7, 0, 0, 0, 1, 0, 0, b'v', b'e', b'r', b's', b'i', b'o', b'n', b'\r', b'\n'];
//! let r = udp::parse_datagram(&d).unwrap();
//! assert_eq!((r.request_id, r.payload), (7, &b"version\r\n"[..]));
//!
//! let mut out = Vec::new();
//! let lens = udp::split_reply(7, &[b'x'; 3000], &mut out).unwrap();
//! assert_eq!(lens, [1400, 1400, 224]);
//! assert_eq!(&out[1400..1408], &[0, 7, 0, 1, 0, 3, 0, 0]);
//! ```

/// The frame header's length.
pub const FRAME_HEADER_LEN: usize = 8;

/// memcached's `UDP_MAX_PAYLOAD_SIZE`: the largest reply datagram, frame
/// header included.
pub const MAX_DATAGRAM: usize = 1400;

/// Reply bytes per datagram.
pub const MAX_PAYLOAD: usize = MAX_DATAGRAM - FRAME_HEADER_LEN;

/// The longest reply the 16-bit datagram count can number.
pub const MAX_REPLY: usize = MAX_PAYLOAD * u16::MAX as usize;

/// A request datagram's id and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestDatagram<'a> {
    /// Echoed in every reply datagram.
    pub request_id: u16,
    /// The request: text or binary protocol.
    pub payload: &'a [u8],
}

/// The request in a datagram, or None for one memcached ignores: no payload
/// after the header, or a count other than 1 (memcached serves no request
/// spread over datagrams). The sequence number and reserved field are not
/// looked at, as in memcached.
pub fn parse_datagram(d: &[u8]) -> Option<RequestDatagram<'_>> {
    if d.len() <= FRAME_HEADER_LEN || d[4..6] != [0, 1] {
        return None;
    }
    Some(RequestDatagram {
        request_id: u16::from_be_bytes([d[0], d[1]]),
        payload: &d[FRAME_HEADER_LEN..],
    })
}

/// Appends `reply` to `out` as datagrams (frame header, then at most
/// [`MAX_PAYLOAD`] bytes) and returns their lengths, in order. None when the
/// reply is longer than [`MAX_REPLY`]; an empty reply is no datagram.
pub fn split_reply(request_id: u16, reply: &[u8], out: &mut Vec<u8>) -> Option<Vec<usize>> {
    if reply.len() > MAX_REPLY {
        return None;
    }
    let total = reply.len().div_ceil(MAX_PAYLOAD);
    let mut lens = Vec::with_capacity(total);
    out.reserve(reply.len() + total * FRAME_HEADER_LEN);
    for (seq, chunk) in reply.chunks(MAX_PAYLOAD).enumerate() {
        // Both fit: `total` is at most u16::MAX, checked above.
        out.extend_from_slice(&request_id.to_be_bytes());
        out.extend_from_slice(&(seq as u16).to_be_bytes());
        out.extend_from_slice(&(total as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(chunk);
        lens.push(FRAME_HEADER_LEN + chunk.len());
    }
    Some(lens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_datagrams() {
        assert_eq!(parse_datagram(b""), None);
        assert_eq!(parse_datagram(&[0, 1, 0, 0, 0, 1, 0, 0]), None);
        assert_eq!(parse_datagram(&[0, 1, 0, 0, 0, 2, 0, 0, b'x']), None);
        assert_eq!(parse_datagram(&[0, 1, 0, 0, 1, 1, 0, 0, b'x']), None);
        // The sequence number and reserved bytes are not checked.
        let d = [1, 2, 9, 9, 0, 1, 7, 7, b'x'];
        assert_eq!(
            parse_datagram(&d),
            Some(RequestDatagram {
                request_id: 0x0102,
                payload: b"x"
            })
        );
    }

    #[test]
    fn reply_split_and_numbered() {
        let reply: Vec<u8> = (0..MAX_PAYLOAD * 2 + 5).map(|i| i as u8).collect();
        let mut out = Vec::new();
        let lens = split_reply(0xabcd, &reply, &mut out).unwrap();
        assert_eq!(lens, [MAX_DATAGRAM, MAX_DATAGRAM, 13]);
        let mut joined = Vec::new();
        let mut at = 0;
        for (seq, len) in lens.iter().enumerate() {
            let d = &out[at..at + len];
            assert_eq!(&d[..8], &[0xab, 0xcd, 0, seq as u8, 0, 3, 0, 0]);
            joined.extend_from_slice(&d[8..]);
            at += len;
        }
        assert_eq!(joined, reply);
        assert_eq!(split_reply(1, b"", &mut out), Some(vec![]));
        assert_eq!(split_reply(1, &vec![0; MAX_REPLY + 1], &mut out), None);
    }
}
