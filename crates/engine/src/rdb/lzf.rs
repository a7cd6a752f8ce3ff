//! LZF decompression (the format of liblzf, which Redis uses for strings
//! and quicklist nodes in RDB). A stream is a run of chunks, each led by a
//! control byte: below 32 it is a literal of `ctrl + 1` bytes; otherwise its
//! top 3 bits are a length (7: one more length byte follows) and its low 5
//! bits with the next byte an offset back into the output, from where
//! `length + 2` bytes are copied (the copy may overlap its own output).

/// The most output one input byte can stand for: a 3-byte back reference
/// copies at most 7 + 255 + 2 bytes.
pub const MAX_RATIO: u64 = 88;

/// Decompresses `input` into exactly `len` bytes; None when the stream is
/// malformed or does not come to exactly `len` bytes. The caller bounds
/// `len` (at most [`MAX_RATIO`] times the input: more is never valid).
pub fn decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    if len as u64 > (input.len() as u64).saturating_mul(MAX_RATIO) {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let lit = input.get(i..i + run)?;
            if out.len() + run > len {
                return None;
            }
            out.extend_from_slice(lit);
            i += run;
            continue;
        }
        let mut run = ctrl >> 5;
        if run == 7 {
            run += *input.get(i)? as usize;
            i += 1;
        }
        let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
        i += 1;
        run += 2;
        if back > out.len() || out.len() + run > len {
            return None;
        }
        let from = out.len() - back;
        for k in 0..run {
            let b = out[from + k];
            out.push(b);
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_back_references() {
        // "abcabcabc": literal "abc", then copy 6 bytes from 3 back.
        let stream = [2, b'a', b'b', b'c', (4 << 5), 2];
        assert_eq!(decompress(&stream, 9).unwrap(), b"abcabcabc");
        // A long run: length byte after a 7 in the top bits.
        let stream = [0, b'x', (7 << 5), 10, 0];
        assert_eq!(decompress(&stream, 20).unwrap(), vec![b'x'; 20]);
    }

    #[test]
    fn refuses_what_does_not_add_up() {
        let stream = [2, b'a', b'b', b'c', (4 << 5), 2];
        assert!(decompress(&stream, 8).is_none());
        assert!(decompress(&stream, 10).is_none());
        // Reference before the start of the output.
        assert!(decompress(&[(1 << 5), 0], 3).is_none());
        // Literal past the end of the input.
        assert!(decompress(&[5, b'a'], 6).is_none());
        // A length no input this short can reach.
        assert!(decompress(&[0, b'a'], 1 << 30).is_none());
        assert!(decompress(&[], 1).is_none());
    }
}
