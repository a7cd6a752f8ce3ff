//! Redis's listpack: a 6-byte header (total bytes u32 LE, element count u16
//! LE, 65535 meaning "count them"), the entries, and a 0xFF terminator.
//! Each entry is an encoding byte (small integer, or string of 6/12/32-bit
//! length, or 13/16/24/32/64-bit integer) with its data, then a "backlen":
//! the size of encoding and data in 1 to 5 bytes of 7 bits, written so
//! that it can be read from its last byte backwards.

use super::canonical_int;

/// The element count stored when it does not fit 16 bits.
const UNKNOWN_COUNT: u16 = u16::MAX;
const HEADER: usize = 6;
const EOF: u8 = 0xFF;

/// Appends one element, as an integer when it is a canonical one (as
/// Redis's `lpAppend` does).
fn push_entry(out: &mut Vec<u8>, item: &[u8]) {
    let start = out.len();
    match canonical_int(item) {
        Some(v) if (0..=127).contains(&v) => out.push(v as u8),
        Some(v) if (-4096..=4095).contains(&v) => {
            let u = (v as u16) & 0x1fff;
            out.push(0xC0 | (u >> 8) as u8);
            out.push(u as u8);
        }
        Some(v) if i16::try_from(v).is_ok() => {
            out.push(0xF1);
            out.extend_from_slice(&(v as i16).to_le_bytes());
        }
        Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
            out.push(0xF2);
            out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        }
        Some(v) if i32::try_from(v).is_ok() => {
            out.push(0xF3);
            out.extend_from_slice(&(v as i32).to_le_bytes());
        }
        Some(v) => {
            out.push(0xF4);
            out.extend_from_slice(&v.to_le_bytes());
        }
        None if item.len() < 64 => {
            out.push(0x80 | item.len() as u8);
            out.extend_from_slice(item);
        }
        None if item.len() < 4096 => {
            out.push(0xE0 | (item.len() >> 8) as u8);
            out.push(item.len() as u8);
            out.extend_from_slice(item);
        }
        None => {
            out.push(0xF0);
            out.extend_from_slice(&(item.len() as u32).to_le_bytes());
            out.extend_from_slice(item);
        }
    }
    let entry_len = (out.len() - start) as u64;
    push_backlen(out, entry_len);
}

/// The backlen of an entry of `len` bytes: 7 bits a byte, the most
/// significant first, every byte but the first flagged with 0x80.
fn push_backlen(out: &mut Vec<u8>, len: u64) {
    let bytes = backlen_size(len);
    for i in (0..bytes).rev() {
        let group = ((len >> (7 * i)) & 127) as u8;
        out.push(if i + 1 == bytes { group } else { group | 128 });
    }
}

/// How many bytes the backlen of an entry of `len` bytes takes.
fn backlen_size(len: u64) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// A listpack holding `items` in order.
pub fn encode<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![0; HEADER];
    let mut count = 0usize;
    for item in items {
        push_entry(&mut out, item);
        count += 1;
    }
    out.push(EOF);
    let total = out.len() as u32;
    out[..4].copy_from_slice(&total.to_le_bytes());
    let count = u16::try_from(count).unwrap_or(UNKNOWN_COUNT);
    out[4..6].copy_from_slice(&count.to_le_bytes());
    out
}

/// The bytes [`push_entry`] would add for `item` (to size nodes).
pub fn entry_size(item: &[u8]) -> usize {
    let data = match canonical_int(item) {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..=4095).contains(&v) => 2,
        Some(v) if i16::try_from(v).is_ok() => 3,
        Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => 4,
        Some(v) if i32::try_from(v).is_ok() => 5,
        Some(_) => 9,
        None if item.len() < 64 => 1 + item.len(),
        None if item.len() < 4096 => 2 + item.len(),
        None => 5 + item.len(),
    };
    data + backlen_size(data as u64)
}

/// The elements of listpack `lp`, integers as decimal strings; None when
/// it is malformed anywhere (header, any entry's encoding or backlen, the
/// count, the terminator). Nothing is allocated beyond what `lp` holds.
pub fn decode(lp: &[u8]) -> Option<Vec<Vec<u8>>> {
    if lp.len() < HEADER + 1 {
        return None;
    }
    let total = u32::from_le_bytes(lp[..4].try_into().ok()?) as usize;
    let count = u16::from_le_bytes(lp[4..6].try_into().ok()?);
    if total != lp.len() || lp[lp.len() - 1] != EOF {
        return None;
    }
    let end = lp.len() - 1;
    let mut items = Vec::with_capacity(count.min(1024) as usize);
    let mut p = HEADER;
    while p < end {
        let (item, entry_len) = entry(&lp[p..end])?;
        let back = backlen_size(entry_len as u64);
        let backlen = lp.get(p + entry_len..p + entry_len + back)?;
        if p + entry_len + back > end {
            return None;
        }
        let mut expected = Vec::with_capacity(5);
        push_backlen(&mut expected, entry_len as u64);
        if backlen != expected.as_slice() {
            return None;
        }
        items.push(item);
        p += entry_len + back;
    }
    if count != UNKNOWN_COUNT && items.len() != count as usize {
        return None;
    }
    Some(items)
}

/// One entry at the start of `b`: its element and the size of its
/// encoding and data (not counting the backlen).
fn entry(b: &[u8]) -> Option<(Vec<u8>, usize)> {
    let first = *b.first()?;
    let int = |v: i64, len: usize| Some((v.to_string().into_bytes(), len));
    let string = |start: usize, len: usize| {
        let s = b.get(start..start.checked_add(len)?)?;
        Some((s.to_vec(), start + len))
    };
    let le = |n: usize| -> Option<u64> {
        let bytes = b.get(1..1 + n)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0u64, |acc, &x| (acc << 8) | x as u64),
        )
    };
    match first {
        0x00..=0x7F => int(first as i64, 1),
        0x80..=0xBF => string(1, (first & 0x3F) as usize),
        0xC0..=0xDF => {
            let u = ((first as u16 & 0x1F) << 8) | *b.get(1)? as u16;
            // 13-bit two's complement.
            let v = if u >= 1 << 12 {
                u as i64 - (1 << 13)
            } else {
                u as i64
            };
            int(v, 2)
        }
        0xE0..=0xEF => {
            let len = ((first as usize & 0x0F) << 8) | *b.get(1)? as usize;
            string(2, len)
        }
        0xF0 => string(5, le(4)? as usize),
        0xF1 => int(le(2)? as u16 as i16 as i64, 3),
        0xF2 => {
            let u = le(3)? as i64;
            int(if u >= 1 << 23 { u - (1 << 24) } else { u }, 4)
        }
        0xF3 => int(le(4)? as u32 as i32 as i64, 5),
        0xF4 => int(le(8)? as i64, 9),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(items: &[&[u8]]) {
        let lp = encode(items.iter().copied());
        let back = decode(&lp).expect("decodes");
        let want: Vec<Vec<u8>> = items.iter().map(|i| i.to_vec()).collect();
        assert_eq!(back, want);
        let sizes: usize = items.iter().map(|i| entry_size(i)).sum();
        assert_eq!(lp.len(), HEADER + 1 + sizes);
    }

    #[test]
    fn every_encoding_round_trips() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        round_trip(&[
            b"0",
            b"127",
            b"128",
            b"-1",
            b"-4096",
            b"4095",
            b"-4097",
            b"32767",
            b"-32768",
            b"32768",
            b"8388607",
            b"-8388608",
            b"8388608",
            b"2147483647",
            b"-2147483648",
            b"2147483648",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"007",
            b"",
            b"hello",
            &mid,
            &long,
        ]);
    }

    #[test]
    fn redis_bytes_decode() {
        // Redis 7.0's listpack of "a", 1, "bb" (from a DUMP of a list).
        let lp = b"\x10\x00\x00\x00\x03\x00\x81a\x02\x01\x01\x82bb\x03\xff";
        assert_eq!(
            decode(lp).unwrap(),
            vec![b"a".to_vec(), b"1".to_vec(), b"bb".to_vec()]
        );
    }

    #[test]
    fn malformed_listpacks_are_refused() {
        let lp = encode([&b"abc"[..], b"12"]);
        for cut in 0..lp.len() {
            assert!(decode(&lp[..cut]).is_none(), "cut at {cut}");
        }
        let mut wrong_count = lp.clone();
        wrong_count[4] = 3;
        assert!(decode(&wrong_count).is_none());
        let mut wrong_backlen = lp.clone();
        wrong_backlen[HEADER + 4] = 9;
        assert!(decode(&wrong_backlen).is_none());
        let mut bad_encoding = lp.clone();
        bad_encoding[HEADER] = 0xF5;
        assert!(decode(&bad_encoding).is_none());
    }
}
