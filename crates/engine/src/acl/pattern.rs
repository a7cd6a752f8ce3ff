//! A key or channel pattern of an ACL rule, sorted once (when the rule is
//! applied) into the shape the per-command check can match fastest: most
//! patterns are a literal (`config`) or a literal prefix (`tenant7:*`),
//! which a byte comparison decides without the glob matcher.

use std::ops::Deref;

/// How a pattern matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// No glob character: the string itself.
    Literal,
    /// A literal followed by one trailing `*`: any string with that
    /// prefix.
    Prefix,
    /// Anything else: the glob matcher.
    Glob,
}

/// A pattern's bytes (as written in the rule) and its shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pattern {
    text: Vec<u8>,
    shape: Shape,
    /// A literal or prefix of at most [`HEAD`] bytes, also kept here
    /// (little-endian, zero above `len`) beside `mask` (ones over its
    /// bytes): a key of 16 bytes or more is then decided by one load, one
    /// AND and one compare, without reading `text` from the heap. `len` is
    /// `u8::MAX` when the literal part is longer (or the shape is Glob).
    head: u128,
    mask: u128,
    len: u8,
}

/// The longest literal part kept inline.
const HEAD: usize = 16;

/// The first 16 bytes of `s` (at least 16 long) as one little-endian
/// integer: one unaligned load.
#[inline(always)]
fn load16(s: &[u8]) -> u128 {
    let mut b = [0u8; HEAD];
    b.copy_from_slice(&s[..HEAD]);
    u128::from_le_bytes(b)
}

/// The first 8 bytes of `s` (at least 8 long), zero-extended.
#[inline(always)]
fn load8(s: &[u8]) -> u128 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&s[..8]);
    u64::from_le_bytes(b) as u128
}

/// The bytes Redis's glob matcher treats specially.
fn is_glob_byte(b: u8) -> bool {
    matches!(b, b'*' | b'?' | b'[' | b'\\')
}

impl Pattern {
    pub(crate) fn new(text: &[u8]) -> Pattern {
        let shape = match text.split_last() {
            _ if !text.iter().copied().any(is_glob_byte) => Shape::Literal,
            Some((b'*', head)) if !head.iter().copied().any(is_glob_byte) => Shape::Prefix,
            _ => Shape::Glob,
        };
        let literal = match shape {
            Shape::Literal => text,
            Shape::Prefix => &text[..text.len() - 1],
            Shape::Glob => &text[..0],
        };
        let (mut head, mut mask, mut len) = (0, 0, u8::MAX);
        if shape != Shape::Glob && literal.len() <= HEAD {
            let mut b = [0u8; HEAD];
            b[..literal.len()].copy_from_slice(literal);
            head = u128::from_le_bytes(b);
            mask = match literal.len() {
                HEAD => u128::MAX,
                n => (1u128 << (8 * n)) - 1,
            };
            len = literal.len() as u8;
        }
        Pattern {
            text: text.to_vec(),
            shape,
            head,
            mask,
            len,
        }
    }

    /// Whether `s` matches, exactly as the glob matcher decides. Inlined
    /// into the check's loop over a user's patterns, where most are turned
    /// away by their first byte.
    #[inline(always)]
    pub(crate) fn matches(&self, s: &[u8]) -> bool {
        // The glob matcher matches no pattern but the empty one against an
        // empty string: that case is left to it.
        let inline = self.len as usize;
        match self.shape {
            // The inline literal: the lengths agree, and the bytes (the
            // key has no more than 16).
            Shape::Literal if inline <= HEAD => {
                s.len() == inline
                    && match inline {
                        HEAD => load16(s) == self.head,
                        8 => load8(s) == self.head,
                        _ => self.head.to_le_bytes()[..inline] == *s,
                    }
            }
            // The inline prefix: one compare when the key is long enough
            // to load whole, else byte by byte.
            Shape::Prefix if inline <= HEAD && !s.is_empty() => {
                if s.len() >= HEAD {
                    load16(s) & self.mask == self.head
                } else if s.len() >= 8 && inline <= 8 {
                    load8(s) & self.mask == self.head
                } else {
                    s.len() >= inline
                        && self.head.to_le_bytes()[..inline]
                            .iter()
                            .zip(s)
                            .all(|(a, b)| a == b)
                }
            }
            // The first byte turns most patterns away without a memcmp.
            Shape::Literal => s.first() == self.text.first() && self.text == s,
            Shape::Prefix if !s.is_empty() => {
                // Byte by byte: a rule's prefix is short, shorter than a
                // call to memcmp takes.
                let prefix = &self.text[..self.text.len() - 1];
                s.len() >= prefix.len() && prefix.iter().zip(s).all(|(a, b)| a == b)
            }
            _ => store::glob::glob_match(&self.text, s, false),
        }
    }
}

/// A selector's key patterns, each with its permissions (read, write), in
/// the order the rules gave them, and indexed by the first byte a key must
/// have to match: a user with many patterns (one per tenant) pays for the
/// few a key could match, not for all of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeyPatterns {
    list: Vec<(Pattern, u8)>,
    /// `by_first[starts[b]..starts[b + 1]]`: the positions in `list` of
    /// the patterns a key starting with byte `b` may match (those whose
    /// first byte is `b`, and those starting with a glob byte).
    starts: Vec<u32>,
    by_first: Vec<u32>,
}

impl KeyPatterns {
    pub(crate) fn clear(&mut self) {
        *self = KeyPatterns::default();
    }

    /// Adds `perm` to `text`'s permissions, adding the pattern if new.
    pub(crate) fn grant(&mut self, text: &[u8], perm: u8) {
        match self.list.iter_mut().find(|(p, _)| **p == *text) {
            Some((_, have)) => *have |= perm,
            None => self.list.push((Pattern::new(text), perm)),
        }
        self.reindex();
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &(Pattern, u8)> {
        self.list.iter()
    }

    /// Whether a pattern with every permission of `perm` matches `key`.
    #[inline]
    pub(crate) fn allow(&self, key: &[u8], perm: u8) -> bool {
        let ok = |at: &u32| {
            let (p, have) = &self.list[*at as usize];
            have & perm == perm && p.matches(key)
        };
        match key.first() {
            Some(&b) if !self.starts.is_empty() => {
                let (from, to) = (self.starts[b as usize], self.starts[b as usize + 1]);
                self.by_first[from as usize..to as usize].iter().any(ok)
            }
            _ => self
                .list
                .iter()
                .any(|(p, have)| have & perm == perm && p.matches(key)),
        }
    }

    fn reindex(&mut self) {
        self.starts.clear();
        self.by_first.clear();
        for b in 0..=255u8 {
            self.starts.push(self.by_first.len() as u32);
            for (at, (p, _)) in self.list.iter().enumerate() {
                let candidate = match p.first() {
                    Some(&first) if !is_glob_byte(first) => first == b,
                    // Empty matches only the empty key; a glob byte may
                    // match anything.
                    Some(_) => true,
                    None => false,
                };
                if candidate {
                    self.by_first.push(at as u32);
                }
            }
        }
        self.starts.push(self.by_first.len() as u32);
    }
}

impl Deref for Pattern {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    /// The compiled pattern `p` decides every string of `strings` as the
    /// glob matcher does.
    fn assert_matches_as_glob(p: &[u8], strings: &[Vec<u8>]) {
        let compiled = Pattern::new(p);
        for s in strings {
            assert_eq!(
                compiled.matches(s),
                store::glob::glob_match(p, s, false),
                "{:?} against {:?}",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(s)
            );
        }
    }

    #[test]
    fn shapes_match_as_the_glob_matcher_does() {
        let patterns: [&[u8]; 10] = [
            b"",
            b"*",
            b"key",
            b"key:*",
            b"key:**",
            b"k?y",
            b"k[ae]y:*",
            b"a\\*",
            b"*:x",
            b"**",
        ];
        let strings: [&[u8]; 9] = [
            b"", b"key", b"key:", b"key:1", b"kay:1", b"a*", b"ab", b"x:x", b"*",
        ];
        let strings: Vec<Vec<u8>> = strings.iter().map(|s| s.to_vec()).collect();
        for p in patterns {
            assert_matches_as_glob(p, &strings);
        }
    }

    #[test]
    fn the_first_byte_index_allows_what_a_scan_of_every_pattern_does() {
        use super::KeyPatterns;
        let mut set = KeyPatterns::default();
        let rules: [(&[u8], u8); 7] = [
            (b"tenant1:*", 3),
            (b"key:*", 1),
            (b"k?y", 2),
            (b"[ab]x", 3),
            (b"\\*z", 3),
            (b"", 3),
            (b"key:*", 2),
        ];
        for (p, perm) in rules {
            set.grant(p, perm);
        }
        let keys: [&[u8]; 9] = [
            b"",
            b"key:1",
            b"kay",
            b"ax",
            b"bx",
            b"*z",
            b"tenant1:",
            b"x",
            b"\xff",
        ];
        for key in keys {
            for perm in 1..=3u8 {
                let scan = set
                    .iter()
                    .any(|(p, have)| have & perm == perm && p.matches(key));
                assert_eq!(set.allow(key, perm), scan, "{key:?} {perm}");
            }
        }
        assert!(
            set.allow(b"key:1", 3),
            "key:* has both permissions after two grants"
        );
    }

    /// Every string of up to `len` bytes of `alphabet`.
    fn all_strings(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
        let mut out = vec![Vec::new()];
        let mut last = vec![Vec::new()];
        for _ in 0..len {
            last = last
                .iter()
                .flat_map(|s| {
                    alphabet.iter().map(move |&b| {
                        let mut t: Vec<u8> = s.clone();
                        t.push(b);
                        t
                    })
                })
                .collect();
            out.extend(last.iter().cloned());
        }
        out
    }

    #[test]
    fn every_short_pattern_matches_every_short_key_as_the_glob_matcher_does() {
        let mut patterns = all_strings(b"ak:*?", 4);
        for p in [
            &b"tenant7:*"[..],
            b"key:*",
            b"key:",
            b"key:\\*",
            b"k[a-z]y:*",
            b"k[^e]y",
            b"\\k*",
        ] {
            patterns.push(p.to_vec());
        }
        let mut keys = all_strings(b"ak:*", 4);
        keys.extend([b"key:000000012345".to_vec(), b"tenant7:x".to_vec()]);
        for p in &patterns {
            assert_matches_as_glob(p, &keys);
        }
    }

    /// The inline fast paths (a literal or prefix of up to 16 bytes, keys
    /// loaded 8 or 16 bytes at a time) around their edges: literal parts of
    /// 0 to 18 bytes, keys of 0 to 24 bytes that agree with the literal
    /// part up to every position, then differ or stop.
    #[test]
    fn inline_literals_and_prefixes_match_as_the_glob_matcher_does() {
        let base: Vec<u8> = b"tenant7:key:0123456789abcdef".to_vec();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        for n in 0..=18 {
            let literal = &base[..n];
            patterns.push(literal.to_vec());
            patterns.push([literal, b"*"].concat());
            patterns.push([literal, b"**"].concat());
            patterns.push([literal, b"?"].concat());
        }
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for n in 0..=24 {
            let key = &base[..n.min(base.len())];
            keys.push(key.to_vec());
            // The same length, one byte changed at each position (also in
            // the top bit, which a sign-extending load would mix up).
            for at in 0..key.len() {
                for flip in [1u8, 0x80] {
                    let mut k = key.to_vec();
                    k[at] ^= flip;
                    keys.push(k);
                }
            }
            keys.push([key, b"\0"].concat());
            keys.push([key, b"\xff"].concat());
        }
        for p in &patterns {
            assert_matches_as_glob(p, &keys);
        }
        let checked = patterns.len() * keys.len();
        assert!(checked > 50_000, "{checked} pairs");
    }

    proptest::proptest! {
        #[test]
        fn long_patterns_match_as_the_glob_matcher_does(
            p in "[ab:]{0,18}[*?]?",
            s in "[ab:]{0,24}",
        ) {
            proptest::prop_assert_eq!(
                Pattern::new(p.as_bytes()).matches(s.as_bytes()),
                store::glob::glob_match(p.as_bytes(), s.as_bytes(), false)
            );
        }

        #[test]
        fn any_pattern_matches_as_the_glob_matcher_does(
            p in "[ab:*?]{0,5}",
            s in "[ab:*]{0,5}",
        ) {
            proptest::prop_assert_eq!(
                Pattern::new(p.as_bytes()).matches(s.as_bytes()),
                store::glob::glob_match(p.as_bytes(), s.as_bytes(), false)
            );
        }
    }
}
