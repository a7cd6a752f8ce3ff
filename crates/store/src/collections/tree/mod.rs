//! The paged encoding of a large collection: a B+tree of arena blocks whose
//! inner nodes carry the element count of each child, so that a position
//! (LINDEX), a rank (ZRANK) or a key (HGET) is found in O(log n).
//!
//! A tree is either *positional* (a list: items in list order, found by
//! rank) or *keyed* (items in byte order of their keys, found by key or by
//! rank). Each item is a key and a value; a list's keys are empty.
//!
//! A command edits a [`Tree`] in process memory: every node it changes is
//! copied out of the segment first (its block is then listed in
//! `replaced`), so the published tree is never written. [`Tree::commit`]
//! writes the changed nodes into new blocks, leaves first, and the caller
//! publishes the new root in the key's entry in one transaction (path copy:
//! docs/design.md, "Collections"). Nodes read from the segment are
//! untrusted (I1): their levels, lengths and counts are checked on every
//! read, and a node that does not check out is `Error::BadValue`.
//!
//! `node` is the node format, `view` reads published nodes in place,
//! `read` searches and visits, `write` edits and commits.

use std::cell::RefCell;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::codec::put_varint;
use crate::error::{Error, Result};
use crate::segment::shm::Region;
use crate::segment::Shared;

mod edge;
mod node;
mod read;
mod view;
mod write;

pub(crate) use edge::Edge;
use node::*;
pub(crate) use node::{leaf_entry, InPlace, MAX_HEIGHT, NODE_MAX, P_LINK};
use read::*;
use view::*;
pub(crate) use view::{child_words, copy_payload, walk};

/// A tree being read or changed by one command.
pub struct Tree {
    sh: Arc<Shared>,
    keyed: bool,
    root: u64,
    height: u8,
    count: u64,
    mem: Vec<Node>,
    replaced: Vec<u64>,
    /// Nodes read from the segment during this command, by block: a
    /// command often seeks the same path more than once (ZADD reads the
    /// member's score, then moves it). Keyed by block offset, which needs
    /// no collision-resistant hash: a cheap one keeps each lookup small.
    cache: RefCell<FxHashMap<u64, Rc<Node>>>,
    /// Where the published entry keeps this tree's item count, when that is
    /// an aligned word a push in place can set (0: it is not).
    count_word: u64,
    /// The root as opened: a commit that leaves it (so the height too)
    /// changes the entry's count in place instead of publishing a new
    /// entry.
    opened: u64,
    /// Words that set one value in its published leaf
    /// ([`Tree::overwrite`]), written with the commit's in-place words.
    overwrite: InPlace,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("keyed", &self.keyed)
            .field("root", &self.root)
            .field("height", &self.height)
            .field("count", &self.count)
            .finish()
    }
}

impl Tree {
    /// The tree published at `root` (`height` levels, `count` items).
    pub(crate) fn open(
        sh: Arc<Shared>,
        keyed: bool,
        root: u64,
        height: u8,
        count: u64,
    ) -> Result<Tree> {
        if height > MAX_HEIGHT || (height == 0) != (root == 0) || (root == 0) != (count == 0) {
            return bad();
        }
        Ok(Tree {
            sh,
            keyed,
            root,
            height,
            count,
            mem: Vec::new(),
            replaced: Vec::new(),
            cache: RefCell::default(),
            count_word: 0,
            opened: root,
            overwrite: InPlace::new(),
        })
    }

    /// A new tree holding `items` (keys ascending when keyed), built in
    /// process memory.
    pub(crate) fn build<'a>(
        sh: Arc<Shared>,
        keyed: bool,
        items: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Tree {
        let mut tree = Tree {
            sh,
            keyed,
            root: 0,
            height: 0,
            count: 0,
            mem: Vec::new(),
            replaced: Vec::new(),
            cache: RefCell::default(),
            count_word: 0,
            opened: 0,
            overwrite: InPlace::new(),
        };
        let mut all = Node::new(0);
        for (k, v) in items {
            all.offs.push(all.body.len() as u32);
            let e = leaf_entry(if keyed { k } else { &[] }, v);
            all.body.extend_from_slice(&e);
        }
        if all.is_empty() {
            return tree;
        }
        tree.count = all.len() as u64;
        // Each level: (node, count, least key, greatest key).
        let mut level: Vec<(Node, u64, Vec<u8>, Vec<u8>)> = all
            .chunk(NODE_FILL)
            .into_iter()
            .map(|n| {
                let (lo, hi) = match keyed {
                    true => (n.item(0).0.to_vec(), n.item(n.len() - 1).0.to_vec()),
                    false => (Vec::new(), Vec::new()),
                };
                let c = n.len() as u64;
                (n, c, lo, hi)
            })
            .collect();
        let mut height = 1u8;
        while level.len() > 1 {
            let mut parent = Node::new(height);
            let mut bounds = Vec::with_capacity(level.len());
            let mut prev_hi: Option<Vec<u8>> = None;
            for (node, count, lo, hi) in level {
                let sep = match &prev_hi {
                    Some(p) if keyed => separator(p, &lo),
                    _ => Vec::new(),
                };
                tree.mem.push(node);
                parent.offs.push(parent.body.len() as u32);
                let e = inner_entry(MEM | (tree.mem.len() - 1) as u64, count, &sep);
                parent.body.extend_from_slice(&e);
                bounds.push((count, lo, hi.clone()));
                prev_hi = Some(hi);
            }
            // Regroup the children under parents of about NODE_FILL bytes.
            let mut next = Vec::new();
            let mut b = bounds.into_iter();
            for mut p in parent.chunk(NODE_FILL) {
                let mut count = 0;
                let (mut lo, mut hi) = (Vec::new(), Vec::new());
                for i in 0..p.len() {
                    let (c, l, h) = b.next().unwrap_or_default();
                    if i == 0 {
                        lo = l;
                    }
                    hi = h;
                    count += c;
                }
                p.clear_first_sep();
                next.push((p, count, lo, hi));
            }
            level = next;
            height += 1;
        }
        let (root, _, _, _) = level.pop().unwrap_or_default();
        tree.mem.push(root);
        tree.root = MEM | (tree.mem.len() - 1) as u64;
        tree.height = height;
        tree
    }

    /// Items in the tree.
    pub(crate) fn len(&self) -> u64 {
        self.count
    }

    /// (root block, height) once committed.
    pub(crate) fn root(&self) -> (u64, u8) {
        (self.root, self.height)
    }

    /// Where the published entry keeps the item count, if this committed
    /// tree still has the root and height it was opened with (then only
    /// that count changes in the entry); None otherwise.
    pub(crate) fn unmoved_count_word(&self) -> Option<u64> {
        (self.count_word != 0 && self.root & MEM == 0 && self.root != 0 && self.root == self.opened)
            .then_some(self.count_word)
    }

    /// The blocks this command's changes took out of the tree: the caller
    /// frees them once the new root is published.
    pub(crate) fn take_replaced(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.replaced)
    }
}
