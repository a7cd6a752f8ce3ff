//! Redis's intset: the width of every element (u32 LE: 2, 4 or 8 bytes),
//! the count (u32 LE), then the elements, little endian, strictly
//! ascending.

/// An intset of `values` (sorted and distinct), in the narrowest width
/// that holds them all, as Redis keeps it.
pub fn encode(values: &[i64]) -> Vec<u8> {
    let width: usize = if values.iter().all(|v| i16::try_from(*v).is_ok()) {
        2
    } else if values.iter().all(|v| i32::try_from(*v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The elements of intset `is`; None unless the width is valid, the
/// size matches the count exactly, the set is not empty and the elements
/// ascend strictly.
pub fn decode(is: &[u8]) -> Option<Vec<i64>> {
    let width = u32::from_le_bytes(is.get(..4)?.try_into().ok()?) as usize;
    let count = u32::from_le_bytes(is.get(4..8)?.try_into().ok()?) as usize;
    if !matches!(width, 2 | 4 | 8) || count == 0 {
        return None;
    }
    let body = &is[8..];
    if body.len() != count.checked_mul(width)? {
        return None;
    }
    let mut out: Vec<i64> = Vec::with_capacity(count);
    for chunk in body.chunks_exact(width) {
        let v = match width {
            2 => i16::from_le_bytes(chunk.try_into().ok()?) as i64,
            4 => i32::from_le_bytes(chunk.try_into().ok()?) as i64,
            _ => i64::from_le_bytes(chunk.try_into().ok()?),
        };
        if out.last().is_some_and(|&prev| prev >= v) {
            return None;
        }
        out.push(v);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_round_trip() {
        for values in [
            vec![-3, 1, 2],
            vec![-40_000, 7],
            vec![i64::MIN, 0, i64::MAX],
        ] {
            let is = encode(&values);
            assert_eq!(decode(&is).unwrap(), values);
        }
        assert_eq!(encode(&[1, 2])[..4], 2u32.to_le_bytes());
        assert_eq!(encode(&[1, 70_000])[..4], 4u32.to_le_bytes());
    }

    #[test]
    fn malformed_intsets_are_refused() {
        let is = encode(&[1, 2, 3]);
        for cut in 0..is.len() {
            assert!(decode(&is[..cut]).is_none(), "cut at {cut}");
        }
        assert!(decode(&encode(&[])).is_none());
        assert!(decode(&encode(&[2, 1])).is_none());
        assert!(decode(&encode(&[2, 2])).is_none());
        let mut width = is.clone();
        width[0] = 3;
        assert!(decode(&width).is_none());
        let mut count = is.clone();
        count[4] = 0xff;
        assert!(decode(&count).is_none());
    }
}
