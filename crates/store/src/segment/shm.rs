//! The lowest layer: a mapped shared-memory region and offset-checked atomic
//! accessors over it. This is the only module of the workspace with `unsafe`.
//!
//! Why this is sound (docs/design.md, invariant I1): every access to the mapping
//! goes through an atomic type (`AtomicU8/U32/U64`) created from a pointer that was
//! bounds- and alignment-checked against the mapping just before. Other processes
//! write the same bytes concurrently, so no access here is ever a plain load or
//! store, and no `&T` to a non-atomic type in the mapping is ever handed out.
//! Byte copies are done word by word with relaxed atomics; callers validate the
//! copied bytes afterwards (seqlock, docs/design.md I4) because another process
//! may have changed them halfway.
#![allow(unsafe_code)]

use std::fs::File;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, Result};

/// A shared mapping. Offsets are bytes from the start of the segment.
pub(crate) struct Region {
    map: MmapRaw,
    len: u64,
    /// Where arena pointers may point: [lo, hi). The whole mapping until the
    /// geometry is known.
    arena: (u64, u64),
}

impl Region {
    /// Maps `len` bytes of `file` shared, read-write.
    pub(crate) fn map(file: &File, len: u64) -> Result<Region> {
        let map = MmapOptions::new()
            .len(len as usize)
            .map_raw(file)
            .map_err(|e| Error::Io("mmap".into(), e))?;
        // Transparent huge pages for the mapping where the kernel allows them for
        // shmem; a refusal is harmless (4 KiB pages).
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(Region {
            map,
            len,
            arena: (0, len),
        })
    }

    /// Restricts arena pointers to [lo, hi) once the geometry is validated.
    pub(crate) fn set_arena(&mut self, lo: u64, hi: u64) {
        self.arena = (lo, hi);
    }

    /// Loads a word that must be 0 or an 8-aligned offset inside the arena
    /// (a block pointer): anything else is corruption, reported before any
    /// arithmetic on it can overflow.
    #[inline]
    pub(crate) fn load_ptr(&self, off: u64) -> Result<u64> {
        let v = self.load64(off)?;
        if self.is_ptr(v) {
            Ok(v)
        } else {
            Err(Error::Corrupted(off))
        }
    }

    /// Whether `v` is 0 or an 8-aligned offset inside the arena.
    #[inline]
    pub(crate) fn is_ptr(&self, v: u64) -> bool {
        v == 0 || (v >= self.arena.0 && v < self.arena.1 && v.is_multiple_of(8))
    }

    /// Loads a block header at `blk` and returns (size, flag bits); a size
    /// larger than the arena is corruption.
    #[inline]
    pub(crate) fn load_block_header(&self, blk: u64) -> Result<(u64, u64)> {
        let h = self.load64(blk)?;
        let size = h & !7;
        if size > self.arena.1 - self.arena.0 {
            return Err(Error::Corrupted(blk));
        }
        Ok((size, h & 7))
    }

    /// Mapped length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    #[inline]
    fn checked(&self, off: u64, size: u64) -> Result<*mut u8> {
        let end = off.checked_add(size).ok_or(Error::Corrupted(off))?;
        if end > self.len || !off.is_multiple_of(size.clamp(1, 8)) {
            return Err(Error::Corrupted(off));
        }
        // SAFETY: `off + size <= len`, so the pointer stays inside the mapping.
        Ok(unsafe { self.map.as_mut_ptr().add(off as usize) })
    }

    #[inline]
    pub(crate) fn a64(&self, off: u64) -> Result<&AtomicU64> {
        let p = self.checked(off, 8)?;
        // SAFETY: `p` is 8-aligned and inside the mapping (checked above), which
        // lives as long as `self`; the memory is only ever accessed atomically (I1).
        Ok(unsafe { AtomicU64::from_ptr(p.cast()) })
    }

    #[inline]
    pub(crate) fn a32(&self, off: u64) -> Result<&AtomicU32> {
        let p = self.checked(off, 4)?;
        // SAFETY: as in `a64`, with 4-byte alignment.
        Ok(unsafe { AtomicU32::from_ptr(p.cast()) })
    }

    #[inline]
    fn a8(&self, off: u64) -> Result<&AtomicU8> {
        let p = self.checked(off, 1)?;
        // SAFETY: as in `a64`; bytes need no alignment.
        Ok(unsafe { AtomicU8::from_ptr(p) })
    }

    #[inline]
    pub(crate) fn load64(&self, off: u64) -> Result<u64> {
        Ok(self.a64(off)?.load(Ordering::Acquire))
    }

    #[inline]
    pub(crate) fn store64(&self, off: u64, v: u64) -> Result<()> {
        self.a64(off)?.store(v, Ordering::Release);
        Ok(())
    }

    #[inline]
    pub(crate) fn load32(&self, off: u64) -> Result<u32> {
        Ok(self.a32(off)?.load(Ordering::Acquire))
    }

    #[inline]
    pub(crate) fn store32(&self, off: u64, v: u32) -> Result<()> {
        self.a32(off)?.store(v, Ordering::Release);
        Ok(())
    }

    /// The `n` aligned words from `off` (8-aligned) as atomics, checked once
    /// for the whole run: byte copies then cost one check, not one a word.
    #[inline]
    fn words(&self, off: u64, n: usize) -> Result<&[AtomicU64]> {
        let size = (n as u64).checked_mul(8).ok_or(Error::Corrupted(off))?;
        if n == 0 {
            return Ok(&[]);
        }
        let p = self.checked(off, size.max(8))?;
        if !off.is_multiple_of(8) {
            return Err(Error::Corrupted(off));
        }
        // SAFETY: `p` is 8-aligned and `off + 8 * n <= len` (checked above), so
        // the `n` words lie inside the mapping, which lives as long as `self`;
        // the memory is only ever accessed atomically (I1).
        Ok(unsafe { std::slice::from_raw_parts(p.cast::<AtomicU64>(), n) })
    }

    /// Appends `len` bytes at `off` to `out`, word by word.
    pub(crate) fn read_bytes(&self, off: u64, len: u64, out: &mut Vec<u8>) -> Result<()> {
        let end = off.checked_add(len).ok_or(Error::Corrupted(off))?;
        if end > self.len {
            return Err(Error::Corrupted(off));
        }
        out.reserve(len as usize);
        let mut pos = off;
        while pos < end && !pos.is_multiple_of(8) {
            out.push(self.a8(pos)?.load(Ordering::Relaxed));
            pos += 1;
        }
        let words = ((end - pos) / 8) as usize;
        let at = out.len();
        out.resize(at + 8 * words, 0);
        for (dst, w) in out[at..].chunks_exact_mut(8).zip(self.words(pos, words)?) {
            dst.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        pos += 8 * words as u64;
        while pos < end {
            out.push(self.a8(pos)?.load(Ordering::Relaxed));
            pos += 1;
        }
        Ok(())
    }

    /// The byte at `off`.
    pub(crate) fn load8(&self, off: u64) -> Result<u8> {
        Ok(self.a8(off)?.load(Ordering::Relaxed))
    }

    /// The `len` bytes at `off` as atomics, checked once for the whole run:
    /// a search reading a few bytes of each entry it compares pays one
    /// check an entry, not one a byte.
    #[inline]
    pub(crate) fn bytes(&self, off: u64, len: u64) -> Result<&[AtomicU8]> {
        if len == 0 {
            return Ok(&[]);
        }
        let end = off.checked_add(len).ok_or(Error::Corrupted(off))?;
        if end > self.len {
            return Err(Error::Corrupted(off));
        }
        // SAFETY: `off + len` is within the mapping (checked above), so the
        // `len` bytes from `off` lie inside it, and it lives as long as
        // `self`; bytes need no alignment, and the memory is only ever
        // accessed atomically (I1).
        Ok(unsafe {
            let p = self.map.as_mut_ptr().add(off as usize);
            std::slice::from_raw_parts(p.cast::<AtomicU8>(), len as usize)
        })
    }

    /// Whether the `bytes.len()` bytes at `off` equal `bytes`.
    pub(crate) fn bytes_eq(&self, off: u64, bytes: &[u8]) -> Result<bool> {
        let end = off
            .checked_add(bytes.len() as u64)
            .ok_or(Error::Corrupted(off))?;
        if end > self.len {
            return Err(Error::Corrupted(off));
        }
        let mut pos = off;
        let mut i = 0;
        while pos < end && !pos.is_multiple_of(8) {
            if self.a8(pos)?.load(Ordering::Relaxed) != bytes[i] {
                return Ok(false);
            }
            pos += 1;
            i += 1;
        }
        let words = ((end - pos) / 8) as usize;
        let chunks = bytes[i..i + words * 8].chunks_exact(8);
        for (w, chunk) in self.words(pos, words)?.iter().zip(chunks) {
            let mut want = [0u8; 8];
            want.copy_from_slice(chunk);
            if w.load(Ordering::Relaxed) != u64::from_le_bytes(want) {
                return Ok(false);
            }
        }
        pos += 8 * words as u64;
        i += words * 8;
        while pos < end {
            if self.a8(pos)?.load(Ordering::Relaxed) != bytes[i] {
                return Ok(false);
            }
            pos += 1;
            i += 1;
        }
        Ok(true)
    }

    /// Writes `bytes` at `off`, word by word. Callers only write bytes that no
    /// reader can reach yet, or that readers validate (I4).
    pub(crate) fn write_bytes(&self, off: u64, bytes: &[u8]) -> Result<()> {
        let end = off
            .checked_add(bytes.len() as u64)
            .ok_or(Error::Corrupted(off))?;
        if end > self.len {
            return Err(Error::Corrupted(off));
        }
        let mut pos = off;
        let mut i = 0;
        while pos < end && !pos.is_multiple_of(8) {
            self.a8(pos)?.store(bytes[i], Ordering::Relaxed);
            pos += 1;
            i += 1;
        }
        let words = ((end - pos) / 8) as usize;
        let chunks = bytes[i..i + words * 8].chunks_exact(8);
        for (w, chunk) in self.words(pos, words)?.iter().zip(chunks) {
            let mut v = [0u8; 8];
            v.copy_from_slice(chunk);
            w.store(u64::from_le_bytes(v), Ordering::Relaxed);
        }
        pos += 8 * words as u64;
        i += words * 8;
        while pos < end {
            self.a8(pos)?.store(bytes[i], Ordering::Relaxed);
            pos += 1;
            i += 1;
        }
        Ok(())
    }

    /// Copies `len` bytes inside the mapping from `src` to `dst` (non-overlapping).
    pub(crate) fn copy_within(&self, src: u64, dst: u64, len: u64) -> Result<()> {
        let mut buf = Vec::with_capacity(len.min(1 << 20) as usize);
        let mut done = 0;
        while done < len {
            let n = (len - done).min(1 << 20);
            buf.clear();
            self.read_bytes(src + done, n, &mut buf)?;
            self.write_bytes(dst + done, &buf)?;
            done += n;
        }
        Ok(())
    }

    /// Zeroes `len` bytes at `off`.
    pub(crate) fn zero(&self, off: u64, len: u64) -> Result<()> {
        let end = off.checked_add(len).ok_or(Error::Corrupted(off))?;
        let mut pos = off;
        while pos < end && !pos.is_multiple_of(8) {
            self.a8(pos)?.store(0, Ordering::Relaxed);
            pos += 1;
        }
        while pos + 8 <= end {
            self.a64(pos)?.store(0, Ordering::Relaxed);
            pos += 8;
        }
        while pos < end {
            self.a8(pos)?.store(0, Ordering::Relaxed);
            pos += 1;
        }
        Ok(())
    }

    /// Hints the CPU to fetch the cache line at `off`.
    #[inline]
    pub(crate) fn prefetch(&self, off: u64) {
        if let Ok(p) = self.checked(off, 1) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a prefetch never faults and reads nothing architecturally;
            // `p` is inside the mapping anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = p;
        }
    }
}

/// `got` (bytes in the segment, from [`Region::bytes`]) compared with
/// `key` in byte order, read in place (a search compares a few keys of a
/// node, never copies it).
pub(crate) fn cmp_atomic(got: &[AtomicU8], key: &[u8]) -> std::cmp::Ordering {
    for (g, &want) in got.iter().zip(key) {
        let g = g.load(Ordering::Relaxed);
        if g != want {
            return g.cmp(&want);
        }
    }
    got.len().cmp(&key.len())
}
