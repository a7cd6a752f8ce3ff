//! How a large collection lives in the segment: its entry's value is a
//! small header naming one B+tree ([`super::tree`]), or two for a sorted
//! set, and the entry (encoding byte `ENC_PAGED`) owns those trees.
//!
//! Ownership moves, it is never shared:
//! - A write copies the path it changes (process memory, then new blocks
//!   chained from `C_NEW_CHAIN`, so a crash frees them), publishes a new
//!   entry naming the new roots, and in that transaction hands the
//!   replaced blocks to `C_FREE_CHAIN`; they are freed right after.
//! - RENAME and MOVE carry the header, hence the trees, to the new entry.
//! - COPY copies every node.
//! - Anything else that unpublishes a paged entry (DEL, expiry, eviction,
//!   FLUSHDB, an overwrite) puts its roots on `C_DROP_CHAIN` in the same
//!   transaction; each tree is then freed leaf-first, every free clearing
//!   the parent's pointer in the same transaction, so a crash halfway
//!   leaves a smaller tree to finish, never a dangling pointer.
//!
//! - A lazy free (UNLINK, FLUSHDB ASYNC, the `lazyfree-lazy-*` settings)
//!   of a value whose free effort passes Redis's threshold puts its roots
//!   on `C_LAZY_CHAIN` instead, in the unpublishing transaction; the
//!   owner frees them later, a bounded number of blocks per step
//!   ([`Handle::free_lazily`]), leaf-first like a drop.
//!
//! A context's recoverer drains the four chains of a dead context.

use super::tree::{self, InPlace, Tree, MAX_HEIGHT, P_LINK};
use crate::error::{Error, Result};
use crate::keyspace::entry::{Raw, ValueType, ENC_PAGED};
use crate::keyspace::handle::{Handle, Locked};
use crate::segment::alloc;
use crate::segment::context::{Ctx, Stat};
use crate::segment::layout::*;

/// First byte of a paged header (compact values start with their own tags).
pub(crate) const TAG_PAGED: u8 = 3;
const HEADER_FIXED: usize = 16;
const PER_TREE: usize = 16;

/// Which removals the store makes by itself free large values lazily
/// (Redis's `lazyfree-lazy-expire` and `-server-del`: an overwrite,
/// RENAME's target…). Evictions always free at once: the evicting writer
/// needs the memory now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LazyFreePolicy {
    /// Keys removed because their time ran out.
    pub expire: bool,
    /// Values a write replaces or removes as a side effect.
    pub server_del: bool,
}

/// A decoded paged header: the item count and each tree's (root, height).
/// Byte 2 says how many zero bytes (`pad`, below 8) come before the
/// count, so that the count is an aligned word in the entry: a push in
/// place sets it in its transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub count: u64,
    pub trees: Vec<(u64, u8)>,
    pub pad: usize,
}

impl Header {
    /// The header of an entry whose key is `key_len` bytes (its value, so
    /// the header, starts that far past an aligned offset).
    pub(crate) fn encode(&self, key_len: usize) -> Vec<u8> {
        let pad = (8 - (E_KEY as usize + key_len) % 8) % 8;
        let mut out = vec![0u8; HEADER_FIXED + pad + PER_TREE * self.trees.len()];
        out[0] = TAG_PAGED;
        out[1] = self.trees.len() as u8;
        out[2] = pad as u8;
        out[8 + pad..16 + pad].copy_from_slice(&self.count.to_le_bytes());
        for (i, (root, height)) in self.trees.iter().enumerate() {
            let at = HEADER_FIXED + pad + PER_TREE * i;
            out[at..at + 8].copy_from_slice(&root.to_le_bytes());
            out[at + 8] = *height;
        }
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Header> {
        if bytes.len() < HEADER_FIXED || bytes[0] != TAG_PAGED {
            return Err(Error::BadValue);
        }
        let n = bytes[1] as usize;
        let pad = bytes[2] as usize;
        if n == 0 || n > 2 || pad >= 8 || bytes.len() != HEADER_FIXED + pad + PER_TREE * n {
            return Err(Error::BadValue);
        }
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let trees = (0..n)
            .map(|i| {
                let at = HEADER_FIXED + pad + PER_TREE * i;
                (word(at), bytes[at + 8])
            })
            .collect();
        Ok(Header {
            count: word(8 + pad),
            trees,
            pad,
        })
    }

    /// Offset, within the value, of tree `i`'s root word.
    pub(crate) fn root_word(&self, i: usize) -> u64 {
        (HEADER_FIXED + self.pad + PER_TREE * i) as u64
    }

    /// Offset, within the value, of the item count.
    pub(crate) fn count_at(&self) -> u64 {
        8 + self.pad as u64
    }
}

/// Whether `raw` is a collection entry that owns paged trees.
pub(crate) fn is_paged(raw: &Raw) -> bool {
    raw.encoding == ENC_PAGED
        && matches!(
            ValueType::from_u8(raw.vtype),
            Some(
                ValueType::List
                    | ValueType::Hash
                    | ValueType::Set
                    | ValueType::ZSet
                    | ValueType::Stream
            )
        )
}

/// Recovery's hook ([`crate::segment::context::RecoveryHooks`]): frees what
/// an unfinished write of the dead context at `voff` had chained.
pub(crate) fn salvage_chains(ctx: &mut Ctx, voff: u64) -> Result<()> {
    drain_chain(ctx, voff + C_NEW_CHAIN)?;
    drain_chain(ctx, voff + C_FREE_CHAIN)?;
    drain_drops(ctx, voff + C_DROP_CHAIN)?;
    let mut budget = u64::MAX;
    let done = drain_lazy(ctx, voff + C_LAZY_CHAIN, &mut budget)?;
    // The dead context's count moves to its stats, which are folded next.
    ctx.region()
        .a64(voff + C_STATS + 8 * Stat::LazyFreed as u64)?
        .fetch_add(done, std::sync::atomic::Ordering::Relaxed);
    ctx.region().store64(voff + C_LAZY_PENDING, 0)
}

/// Redis's `LAZYFREE_THRESHOLD`: a value whose free effort (here its item
/// count, which bounds the blocks its trees take) is at most this is freed
/// at once even by a lazy free.
pub(crate) const LAZY_FREE_EFFORT: u64 = 64;

/// Set in the link word of a root on the lazy chain when it is the last
/// root of its value to be freed (blocks are 8-aligned, so the bit is
/// free): freeing it finishes one value.
const LAST_OF_VALUE: u64 = 1;

/// Frees at most `budget` blocks (counting down) of the trees on the lazy
/// chain at context word `word`; returns how many values it finished.
/// Each block goes in the transaction that clears the pointer to it, so a
/// crash leaves smaller trees on the chain, never a dangling pointer.
pub(crate) fn drain_lazy(ctx: &mut Ctx, word: u64, budget: &mut u64) -> Result<u64> {
    let mut done = 0;
    while *budget > 0 {
        let root = ctx.region().load_ptr(word)?;
        if root == 0 {
            break;
        }
        let link = ctx.region().load64(root + 8 + P_LINK)?;
        let next = link & !LAST_OF_VALUE;
        if !ctx.region().is_ptr(next) {
            return Err(Error::Corrupted(root + 8 + P_LINK));
        }
        if !free_children_within(ctx, root, MAX_HEIGHT, budget)? || *budget == 0 {
            break;
        }
        alloc::free_setting(ctx, root, word, next)?;
        *budget -= 1;
        done += link & LAST_OF_VALUE;
    }
    Ok(done)
}

/// [`free_children`] that stops when `budget` blocks are freed; true once
/// nothing is left under `blk`.
fn free_children_within(ctx: &mut Ctx, blk: u64, above: u8, budget: &mut u64) -> Result<bool> {
    let Some((level, words)) = tree::child_words(ctx.region(), blk) else {
        return Ok(true);
    };
    if level >= above {
        return Ok(true);
    }
    for w in words {
        let child = ctx.region().load_ptr(w).unwrap_or(0);
        if child == 0 {
            continue;
        }
        match tree::child_words(ctx.region(), child) {
            Some((l, _)) if l + 1 == level => {}
            _ => continue,
        }
        if !free_children_within(ctx, child, level, budget)? || *budget == 0 {
            return Ok(false);
        }
        alloc::free_setting(ctx, child, w, 0)?;
        *budget -= 1;
    }
    Ok(true)
}

/// The blocks of the trees on the lazy chain at `word` (for the
/// consistency check), part-freed trees included.
pub(crate) fn lazy_blocks(
    r: &crate::segment::shm::Region,
    word: u64,
    f: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<()> {
    fn walk(
        r: &crate::segment::shm::Region,
        blk: u64,
        above: u8,
        f: &mut dyn FnMut(u64) -> Result<()>,
    ) -> Result<()> {
        f(blk)?;
        let Some((level, words)) = tree::child_words(r, blk) else {
            return Err(Error::Corrupted(blk));
        };
        if level >= above {
            return Err(Error::Corrupted(blk));
        }
        for w in words {
            let child = r.load_ptr(w)?;
            if child != 0 {
                walk(r, child, level, f)?;
            }
        }
        Ok(())
    }
    let mut root = r.load_ptr(word)?;
    while root != 0 {
        walk(r, root, MAX_HEIGHT, f)?;
        let next = r.load64(root + 8 + P_LINK)? & !LAST_OF_VALUE;
        if !r.is_ptr(next) {
            return Err(Error::Corrupted(root + 8 + P_LINK));
        }
        root = next;
    }
    Ok(())
}

/// Frees every block on the chain whose head is context word `word`, a
/// few per transaction (each moves the head on).
pub(crate) fn drain_chain(ctx: &mut Ctx, word: u64) -> Result<()> {
    let limit = ctx.sh.geo.arena_size / alloc::MIN_BLOCK + 1;
    let mut freed = 0;
    while freed <= limit {
        match alloc::free_chained(ctx, word)? {
            0 => return Ok(()),
            n => freed += n as u64,
        }
    }
    Err(Error::Corrupted(word))
}

/// Frees each whole tree whose root is on the drop chain at context word
/// `word`, leaf-first.
pub(crate) fn drain_drops(ctx: &mut Ctx, word: u64) -> Result<()> {
    let limit = ctx.sh.geo.arena_size / alloc::MIN_BLOCK + 1;
    for _ in 0..limit {
        let root = ctx.region().load_ptr(word)?;
        if root == 0 {
            return Ok(());
        }
        let next = ctx.region().load_ptr(root + 8 + P_LINK).unwrap_or(0);
        free_children(ctx, root, MAX_HEIGHT)?;
        alloc::free_setting(ctx, root, word, next)?;
    }
    Err(Error::Corrupted(word))
}

/// Frees the subtrees under node `blk` (whose level is below `above`),
/// each block in the transaction that clears the pointer to it. A child
/// that is not a node one level down is left alone (damage leaks, it
/// never frees a stranger's block twice).
fn free_children(ctx: &mut Ctx, blk: u64, above: u8) -> Result<()> {
    let Some((level, words)) = tree::child_words(ctx.region(), blk) else {
        return Ok(());
    };
    if level >= above {
        return Ok(());
    }
    for w in words {
        let child = ctx.region().load_ptr(w).unwrap_or(0);
        if child == 0 {
            continue;
        }
        match tree::child_words(ctx.region(), child) {
            Some((l, _)) if l + 1 == level => {}
            _ => continue,
        }
        free_children(ctx, child, level)?;
        alloc::free_setting(ctx, child, w, 0)?;
    }
    Ok(())
}

impl Handle {
    /// Allocates tree node blocks for payloads of `sizes` bytes, each
    /// chained on `C_NEW_CHAIN` until the write that needs them is
    /// published: a few per transaction, and one at a time (evicting if the
    /// policy allows) once the arena or `maxmemory` is full.
    fn alloc_tree_nodes(&mut self, sizes: &[u64]) -> Result<Vec<u64>> {
        let chain = self.ctx.off + C_NEW_CHAIN;
        let maxmem = self.ctx.region().load64(H_MAXMEMORY)?;
        let mut blocks = alloc::alloc_chained(&mut self.ctx, sizes, chain, maxmem)?;
        for &size in &sizes[blocks.len()..] {
            let pending = self.pending_new_word()?;
            let blk = self.alloc_block(size, pending)?;
            let head = self.ctx.region().load64(chain)?;
            // The block is private: a plain store of its link is enough (I8).
            self.ctx.region().store64(blk + 8 + P_LINK, head)?;
            self.ctx.wlog64(chain, blk)?;
            self.ctx.wlog64(pending, 0)?;
            self.ctx.commit()?;
            blocks.push(blk);
        }
        Ok(blocks)
    }

    /// Writes the changed nodes of `trees` into new blocks; returns the
    /// blocks the changes took out of the published trees, and the words to
    /// change in place when the new roots are published.
    pub(crate) fn commit_trees(&mut self, trees: &mut [&mut Tree]) -> Result<(Vec<u64>, InPlace)> {
        let mut replaced = Vec::new();
        let mut words = InPlace::new();
        let sh = self.ctx.sh.clone();
        for t in trees.iter_mut() {
            words.extend(t.commit(
                &mut |sizes| self.alloc_tree_nodes(sizes),
                &mut |blk, payload| write_tree_node(&sh.region, blk, payload),
            )?);
            replaced.extend(t.take_replaced());
        }
        Ok((replaced, words))
    }

    /// Publishes `blk`, a new paged entry, as the key of `l`, in one
    /// transaction that also adopts the new blocks, changes the inner nodes
    /// kept in place (`words`) and hands `replaced` to the free chain.
    /// `drop_old`: the replaced entry's trees are not the ancestors of the
    /// new ones and go whole (…STORE).
    pub(crate) fn publish_paged(
        &mut self,
        l: &mut Locked,
        blk: u64,
        pending: u64,
        (replaced, words): (&[u64], &InPlace),
        drop_old: bool,
    ) -> Result<()> {
        let r = self.ctx.region();
        let free_chain = self.ctx.off + C_FREE_CHAIN;
        let mut next = r.load64(free_chain)?;
        // Link the replaced blocks to each other: their link words mean
        // nothing while they are in the tree, and the tree is only read
        // under the bucket lock we hold.
        for &b in replaced.iter().rev() {
            r.store64(b + 8 + P_LINK, next)?;
            next = b;
        }
        self.publish_with(l, blk, pending, drop_old, |h| {
            for &(off, val) in words {
                h.ctx.wlog64(off, val)?;
            }
            h.ctx.wlog64(h.ctx.off + C_NEW_CHAIN, 0)?;
            h.ctx.wlog64(free_chain, next)
        })
    }

    /// Publishes changes made in the trees of the (published) entry of `l`
    /// that left its roots where they were: `words` (node words and the
    /// entry's count) set in one
    /// transaction under the bucket's seqlock, with the entry's new version
    /// and access time, as a new entry would get them (I5, I8).
    /// `replaced`: blocks the change took out of the trees, handed to the
    /// free chain in that transaction (new blocks are adopted in it).
    pub(crate) fn publish_in_place(
        &mut self,
        l: &mut Locked,
        words: &InPlace,
        replaced: &[u64],
    ) -> Result<()> {
        let f = l.found.ok_or(Error::NoSuchKey)?;
        let r = self.ctx.region();
        let free_chain = self.ctx.off + C_FREE_CHAIN;
        let mut next = r.load64(free_chain)?;
        // As in `publish_paged`: the replaced blocks' link words mean
        // nothing while they are in the tree, read only under our lock.
        for &b in replaced.iter().rev() {
            r.store64(b + 8 + P_LINK, next)?;
            next = b;
        }
        let now_ms = self.now_ms();
        let lfu = self.lfu_accessed(f.raw.lfu, now_ms)?;
        let version = if let Some(lsn) = self.log.replay_lsn {
            lsn
        } else if self.logging() {
            self.log_reserve()?
        } else {
            self.next_version()?
        };
        let bucket = l.pos.bucket;
        self.ctx.seq_bump(bucket)?;
        for &(off, val) in words {
            self.ctx.wlog64(off, val)?;
        }
        self.ctx.wlog64(self.ctx.off + C_NEW_CHAIN, 0)?;
        self.ctx.wlog64(free_chain, next)?;
        self.ctx.wlog64(f.raw.off + E_LSN, version)?;
        let lru = (now_ms / 1000) as u32;
        self.ctx
            .wlog64(f.raw.off + E_LRU, u64::from(lru) | u64::from(lfu) << 32)?;
        self.log_committing()?;
        self.ctx.commit()?;
        self.log_complete()?;
        self.ctx.seq_bump(bucket)?;
        l.found = Some(crate::keyspace::index::Found {
            raw: Raw::read(self.ctx.region(), f.raw.off)?,
            ..f
        });
        Ok(())
    }

    /// Part of the transaction that unpublishes `raw`: its trees, if it
    /// owns any, go on the drop chain, or with `lazy` and more than
    /// [`LAZY_FREE_EFFORT`] items on the lazy chain.
    pub(crate) fn drop_trees_in_txn(&mut self, raw: &Raw, lazy: bool) -> Result<()> {
        if !is_paged(raw) {
            return Ok(());
        }
        let mut bytes = Vec::new();
        self.ctx
            .region()
            .read_bytes(raw.value_off(), raw.vallen, &mut bytes)?;
        let Ok(header) = Header::decode(&bytes) else {
            return Ok(());
        };
        let lazy = lazy && header.count > LAZY_FREE_EFFORT;
        let chain = self.ctx.off + if lazy { C_LAZY_CHAIN } else { C_DROP_CHAIN };
        let mut first = true;
        for (root, _) in header.trees {
            if root == 0 || !self.ctx.region().is_ptr(root) {
                continue;
            }
            let head = self.ctx.region().load64(chain)?;
            // The first root pushed is the value's last one freed.
            let mark = if lazy && first { LAST_OF_VALUE } else { 0 };
            self.ctx.wlog64(root + 8 + P_LINK, head | mark)?;
            self.ctx.wlog64(chain, root)?;
            first = false;
        }
        if lazy && !first {
            let pending = self.ctx.off + C_LAZY_PENDING;
            let n = self.ctx.region().load64(pending)?;
            self.ctx.wlog64(pending, n + 1)?;
        }
        Ok(())
    }

    /// Frees at most `budget` blocks of the values this context's lazy
    /// frees detached; true while some are left.
    pub fn free_lazily(&mut self, budget: u64) -> Result<bool> {
        let chain = self.ctx.off + C_LAZY_CHAIN;
        if self.ctx.region().load64(chain)? == 0 {
            return Ok(false);
        }
        let mut left = budget;
        let done = drain_lazy(&mut self.ctx, chain, &mut left)?;
        if done > 0 {
            // Only this context writes its count (its recoverer resets it).
            let pending = self.ctx.off + C_LAZY_PENDING;
            let n = self.ctx.region().load64(pending)?;
            self.ctx.region().store64(pending, n.saturating_sub(done))?;
            self.ctx.stat_add(Stat::LazyFreed, done);
        }
        Ok(self.ctx.region().load64(chain)? != 0)
    }

    /// Values detached by lazy frees and not wholly freed yet, over every
    /// context (INFO's `lazyfree_pending_objects`).
    pub fn lazy_free_pending(&self) -> Result<u64> {
        let geo = &self.ctx.sh.geo;
        let mut sum = 0u64;
        for i in 0..geo.ctx_count as u64 {
            sum = sum.saturating_add(
                self.ctx
                    .region()
                    .load64(geo.ctx_off + i * CTX_SIZE + C_LAZY_PENDING)?,
            );
        }
        Ok(sum)
    }

    /// Sets whether the values the next operations unpublish are freed
    /// lazily (UNLINK, FLUSHDB ASYNC…); returns the previous setting.
    pub fn set_lazy_free(&mut self, on: bool) -> bool {
        std::mem::replace(&mut self.lazy_now, on)
    }

    /// Sets which removals the store makes by itself free large values
    /// lazily (`lazyfree-lazy-expire`, `-server-del`).
    pub fn set_lazy_policy(&mut self, policy: LazyFreePolicy) {
        self.lazy_policy = policy;
    }

    /// Runs `f` with lazy frees on when `on` (or already on).
    pub(crate) fn lazily<T>(&mut self, on: bool, f: impl FnOnce(&mut Handle) -> T) -> T {
        let prev = self.lazy_now;
        self.lazy_now |= on;
        let out = f(self);
        self.lazy_now = prev;
        out
    }

    /// COPY of a paged entry: after `new_blk` (private) got a byte copy of
    /// `src`'s value, gives it copies of every tree node.
    pub(crate) fn copy_trees(&mut self, src: &Raw, new_blk: u64, value_off: u64) -> Result<()> {
        if !is_paged(src) {
            return Ok(());
        }
        let mut bytes = Vec::new();
        self.ctx
            .region()
            .read_bytes(src.value_off(), src.vallen, &mut bytes)?;
        let header = Header::decode(&bytes)?;
        for (i, (root, height)) in header.trees.iter().enumerate() {
            if *height == 0 {
                continue;
            }
            let copy = self.copy_node(*root)?;
            // The value need not be word-aligned in its block; it is
            // still private, so plain byte writes do (I8).
            self.ctx.region().write_bytes(
                new_blk + value_off + header.root_word(i),
                &copy.to_le_bytes(),
            )?;
        }
        Ok(())
    }

    fn copy_node(&mut self, blk: u64) -> Result<u64> {
        let region = self.ctx.sh.clone();
        let payload = tree::copy_payload(&region.region, blk, &mut |child| self.copy_node(child))?;
        let copy = self.alloc_tree_nodes(&[payload.len() as u64])?[0];
        write_tree_node(self.ctx.region(), copy, &payload)?;
        Ok(copy)
    }

    /// Frees what the last write left on this context's chains: replaced
    /// blocks and dropped trees.
    pub(crate) fn drain_tree_chains(&mut self) -> Result<()> {
        let off = self.ctx.off;
        drain_chain(&mut self.ctx, off + C_FREE_CHAIN)?;
        drain_drops(&mut self.ctx, off + C_DROP_CHAIN)
    }

    /// Frees the new tree blocks of a write that failed.
    pub(crate) fn drain_new_tree_nodes(&mut self) -> Result<()> {
        let off = self.ctx.off;
        drain_chain(&mut self.ctx, off + C_NEW_CHAIN)
    }
}

/// Fills a block from `Handle::alloc_tree_nodes` with a node's payload
/// (the block is private; its link word stays).
fn write_tree_node(r: &crate::segment::shm::Region, blk: u64, payload: &[u8]) -> Result<()> {
    let body = payload.get(8..).ok_or(Error::BadValue)?;
    r.write_bytes(blk + 16, body)
}

/// The blocks of every tree `raw` owns (for the consistency check).
pub(crate) fn owned_blocks(
    r: &crate::segment::shm::Region,
    raw: &Raw,
    f: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<()> {
    if !is_paged(raw) {
        return Ok(());
    }
    let mut bytes = Vec::new();
    r.read_bytes(raw.value_off(), raw.vallen, &mut bytes)?;
    let header = Header::decode(&bytes)?;
    for (root, height) in header.trees {
        tree::walk(r, root, height, header.count, f)?;
    }
    Ok(())
}

/// Opens the trees a paged header names.
pub(crate) fn open_trees(
    sh: &std::sync::Arc<crate::segment::Shared>,
    bytes: &[u8],
    keyed: &[bool],
) -> Result<Vec<Tree>> {
    let header = Header::decode(bytes)?;
    if header.trees.len() != keyed.len() {
        return Err(Error::BadValue);
    }
    header
        .trees
        .iter()
        .zip(keyed)
        .map(|(&(root, height), &k)| Tree::open(sh.clone(), k, root, height, header.count))
        .collect()
}

/// The header for `trees` (all of the same count).
pub(crate) fn header_of(trees: &[&mut Tree]) -> Header {
    Header {
        count: trees.first().map_or(0, |t| t.len()),
        trees: trees.iter().map(|t| t.root()).collect(),
        pad: 0,
    }
}
