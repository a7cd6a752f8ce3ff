//! A small length-prefixed encoding for what one worker sends another
//! (diagnostics answers). Both ends run the same binary; a malformed
//! message decodes as far as it is whole and no further.

/// Appends values to a buffer.
#[derive(Default)]
pub(crate) struct Writer(pub Vec<u8>);

impl Writer {
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// Reads values back; `None` once the input runs out or is malformed.
pub(crate) struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_le_bytes(*head))
    }

    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.u64()?).ok()?;
        if len > self.0.len() {
            self.0 = &[];
            return None;
        }
        let (b, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(b)
    }

    /// A count of items that each take at least `min_item` bytes: bounded by
    /// what is left, so a corrupt count cannot make a reader allocate much.
    pub(crate) fn count(&mut self, min_item: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n <= self.0.len() / min_item.max(1)).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let mut w = Writer::default();
        w.u64(7);
        w.bytes(b"abc");
        let mut r = Reader(&w.0);
        assert_eq!(r.u64(), Some(7));
        assert_eq!(r.bytes(), Some(&b"abc"[..]));
        assert_eq!(r.u64(), None);
        let mut cut = Reader(&w.0[..12]);
        assert_eq!(cut.u64(), Some(7));
        assert_eq!(cut.bytes(), None);
        assert_eq!(Reader(&u64::MAX.to_le_bytes()).count(1), None);
    }
}
