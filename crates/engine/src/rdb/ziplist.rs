//! Redis's ziplist (RDB before Redis 7.0 wrote lists, hashes and sorted
//! sets in it; 7.0 still loads them): a header of total bytes (u32 LE),
//! the offset of the last entry (u32 LE) and the entry count (u16 LE,
//! 65535 meaning "count them"), the entries, and a 0xFF terminator. Each
//! entry is the previous entry's size (1 byte, or 0xFE and a u32 LE), an
//! encoding (string of 6/14/32-bit big-endian length, or an 8/16/24/32/64-bit
//! integer, or an immediate 0..=12) and its data. Only reading is needed.

const HEADER: usize = 10;
const EOF: u8 = 0xFF;
const UNKNOWN_COUNT: u16 = u16::MAX;
/// A previous-entry length byte this large means a 4-byte length follows.
const BIG_PREVLEN: u8 = 0xFE;

/// The elements of ziplist `zl`, integers as decimal strings; None when it
/// is malformed anywhere (header, tail offset, any entry's previous length
/// or encoding, the count, the terminator).
pub fn decode(zl: &[u8]) -> Option<Vec<Vec<u8>>> {
    if zl.len() < HEADER + 1 {
        return None;
    }
    let total = u32::from_le_bytes(zl[..4].try_into().ok()?) as usize;
    let tail = u32::from_le_bytes(zl[4..8].try_into().ok()?) as usize;
    let count = u16::from_le_bytes(zl[8..10].try_into().ok()?);
    if total != zl.len() || zl[zl.len() - 1] != EOF {
        return None;
    }
    let end = zl.len() - 1;
    let mut items = Vec::with_capacity(count.min(1024) as usize);
    let mut p = HEADER;
    let mut prev_len = 0usize;
    let mut last = HEADER;
    while p < end {
        let (item, len) = entry(&zl[p..end], prev_len)?;
        items.push(item);
        last = p;
        prev_len = len;
        p += len;
    }
    if tail != last {
        return None;
    }
    if count != UNKNOWN_COUNT && items.len() != count as usize {
        return None;
    }
    Some(items)
}

/// One entry at the start of `b`, whose predecessor took `prev_len` bytes:
/// its element and its whole size.
fn entry(b: &[u8], prev_len: usize) -> Option<(Vec<u8>, usize)> {
    let (stored_prev, mut p) = match *b.first()? {
        BIG_PREVLEN => (
            u32::from_le_bytes(b.get(1..5)?.try_into().ok()?) as usize,
            5,
        ),
        EOF => return None,
        n => (n as usize, 1),
    };
    if stored_prev != prev_len {
        return None;
    }
    let enc = *b.get(p)?;
    p += 1;
    let int = |v: i64, size: usize| Some((v.to_string().into_bytes(), p + size));
    let le = |n: usize| -> Option<u64> {
        let bytes = b.get(p..p + n)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0u64, |acc, &x| (acc << 8) | x as u64),
        )
    };
    let (start, len) = match enc >> 6 {
        0 => (p, (enc & 0x3F) as usize),
        1 => (p + 1, ((enc as usize & 0x3F) << 8) | *b.get(p)? as usize),
        2 if enc == 0x80 => {
            let be = b.get(p..p + 4)?;
            (p + 4, u32::from_be_bytes(be.try_into().ok()?) as usize)
        }
        2 => return None,
        _ => {
            return match enc {
                0xC0 => int(le(2)? as u16 as i16 as i64, 2),
                0xD0 => int(le(4)? as u32 as i32 as i64, 4),
                0xE0 => int(le(8)? as i64, 8),
                0xF0 => {
                    let u = le(3)? as i64;
                    int(if u >= 1 << 23 { u - (1 << 24) } else { u }, 3)
                }
                0xFE => int(le(1)? as u8 as i8 as i64, 1),
                0xF1..=0xFD => int((enc & 0x0F) as i64 - 1, 0),
                _ => None,
            };
        }
    };
    let data = b.get(start..start.checked_add(len)?)?;
    Some((data.to_vec(), start + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist of `entries` (already encoded: encoding byte and data),
    /// with correct previous lengths, tail and count.
    fn build(entries: &[&[u8]]) -> Vec<u8> {
        let mut out = vec![0; HEADER];
        let mut prev = 0usize;
        let mut tail = HEADER;
        for e in entries {
            tail = out.len();
            let start = out.len();
            if prev < 254 {
                out.push(prev as u8);
            } else {
                out.push(BIG_PREVLEN);
                out.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            out.extend_from_slice(e);
            prev = out.len() - start;
        }
        out.push(EOF);
        let total = out.len() as u32;
        out[..4].copy_from_slice(&total.to_le_bytes());
        out[4..8].copy_from_slice(&(tail as u32).to_le_bytes());
        out[8..10].copy_from_slice(&(entries.len() as u16).to_le_bytes());
        out
    }

    #[test]
    fn every_encoding_decodes() {
        let mut long = vec![0x40 | 1, 0x2C];
        long.extend_from_slice(&[b'z'; 300]);
        let mut huge = vec![0x80, 0, 0, 0x40, 0];
        huge.extend_from_slice(&[b'h'; 0x4000]);
        let zl = build(&[
            b"\x03abc",
            &long,
            &huge,
            b"\xC0\x00\x80",
            b"\xD0\xff\xff\xff\xff",
            b"\xE0\x01\x00\x00\x00\x00\x00\x00\x00",
            b"\xF0\xff\xff\x7f",
            b"\xFE\x80",
            b"\xF1",
            b"\xFD",
        ]);
        let items = decode(&zl).unwrap();
        let texts: Vec<Vec<u8>> = vec![
            b"abc".to_vec(),
            vec![b'z'; 300],
            vec![b'h'; 0x4000],
            b"-32768".to_vec(),
            b"-1".to_vec(),
            b"1".to_vec(),
            b"8388607".to_vec(),
            b"-128".to_vec(),
            b"0".to_vec(),
            b"12".to_vec(),
        ];
        assert_eq!(items, texts);
    }

    #[test]
    fn malformed_ziplists_are_refused() {
        let zl = build(&[b"\x03abc", b"\xF5"]);
        assert_eq!(decode(&zl).unwrap(), vec![b"abc".to_vec(), b"4".to_vec()]);
        for cut in 0..zl.len() {
            assert!(decode(&zl[..cut]).is_none(), "cut at {cut}");
        }
        let mut wrong_tail = zl.clone();
        wrong_tail[4] = 10;
        assert!(decode(&wrong_tail).is_none());
        let mut wrong_prev = zl.clone();
        wrong_prev[15] = 3;
        assert!(decode(&wrong_prev).is_none());
        let mut bad_encoding = zl.clone();
        bad_encoding[16] = 0xF0 | 0x0F;
        assert!(decode(&bad_encoding).is_none());
        // An empty ziplist is well formed.
        assert_eq!(decode(&build(&[])).unwrap(), Vec::<Vec<u8>>::new());
    }
}
