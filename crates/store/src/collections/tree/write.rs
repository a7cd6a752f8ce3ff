//! Changing a tree: copy the path into process memory, edit it (split,
//! merge, shorten), then write the changed nodes into new blocks, leaves
//! first ([`Tree::commit`]).

use super::*;

impl Tree {
    // ---------- changing ----------

    /// Copies the nodes of `path` into process memory (those not there
    /// yet), relinking each parent to its copy. Returns their indexes in
    /// `mem`, root first.
    pub(super) fn materialize(&mut self, path: Path) -> Result<Vec<usize>> {
        let mut out: Vec<usize> = Vec::with_capacity(path.steps.len());
        let mut parent_idx = 0usize;
        for step in path.steps {
            let idx = if step.ptr & MEM != 0 {
                (step.ptr & !MEM) as usize
            } else {
                // Every node a search read from the segment came with its copy.
                let copy = step.copy.ok_or(Error::BadValue)?;
                let node = self.take_node(step.ptr, Some(copy), 0, 0)?;
                self.mem.push(node);
                self.replaced.push(step.ptr);
                self.mem.len() - 1
            };
            match out.last() {
                None => self.root = MEM | idx as u64,
                Some(&p) => {
                    let c = self.mem[p].count(parent_idx);
                    self.mem[p].set_child(parent_idx, MEM | idx as u64, c);
                }
            }
            parent_idx = step.idx;
            out.push(idx);
        }
        Ok(out)
    }

    /// Makes child `ci` of mem node `parent` a mem node; returns its index.
    pub(super) fn child_mut(&mut self, parent: usize, ci: usize) -> Result<usize> {
        let (ptr, count, _) = self.mem[parent].child(ci);
        if ptr & MEM != 0 {
            return Ok((ptr & !MEM) as usize);
        }
        let level = self.mem[parent].level - 1;
        let node = self.take_node(ptr, None, level, count)?;
        self.mem.push(node);
        self.replaced.push(ptr);
        let idx = self.mem.len() - 1;
        self.mem[parent].set_child(ci, MEM | idx as u64, count);
        Ok(idx)
    }

    /// Adds `delta` to the counts along a materialized path.
    pub(super) fn adjust_counts(&mut self, nodes: &[usize], idxs: &[usize], delta: i64) {
        for d in 0..nodes.len().saturating_sub(1) {
            let (p, ci) = (nodes[d], idxs[d]);
            let (ptr, c) = (self.mem[p].ptr(ci), self.mem[p].count(ci));
            self.mem[p].set_child(ci, ptr, c.wrapping_add(delta as u64));
        }
        self.count = self.count.wrapping_add(delta as u64);
    }

    pub(super) fn edit(&mut self, path: Path) -> Result<(Vec<usize>, Vec<usize>)> {
        let idxs: Vec<usize> = path.steps.iter().map(|s| s.idx).collect();
        let nodes = self.materialize(path)?;
        Ok((nodes, idxs))
    }

    /// Puts `key` -> `val` in a keyed tree; returns the old value.
    pub(crate) fn upsert(&mut self, key: &[u8], val: &[u8]) -> Result<Option<Vec<u8>>> {
        // A search in place first: when the item is already there with this
        // value (SADD of a member, HSET of the same value), no node is copied.
        if let Some((_, old)) = self.find_item(key)? {
            if old == val {
                return Ok(Some(old));
            }
        }
        self.put_key(key, val)
    }

    /// [`upsert`](Self::upsert) for a caller that knows the value changes
    /// (a sorted set's new score): straight to the path copy.
    pub(crate) fn put_key(&mut self, key: &[u8], val: &[u8]) -> Result<Option<Vec<u8>>> {
        let path = self.seek_key(key)?;
        let found = path.found;
        let old = if found {
            self.leaf_item(&path)?.map(|(_, v)| v)
        } else {
            None
        };
        if old.as_deref() == Some(val) {
            return Ok(old);
        }
        self.put(path, key, val, found)?;
        Ok(old)
    }

    /// Sets the value of `key`, which a tree unchanged so far in this
    /// command holds with a value as long as `val`, without copying a node:
    /// the words of its leaf that hold the value are written, logged, in
    /// the transaction that publishes the tree (as inner nodes' child
    /// words are), under the bucket's seqlock. False (nothing done) when
    /// the key is missing, the value's length differs, or the tree has
    /// changes. Until the commit, the tree still reads the old value, and
    /// any other change to it must [`cancel_overwrite`](Self::cancel_overwrite)
    /// first and make this one by copying: the caller keeps track.
    pub(crate) fn overwrite(&mut self, key: &[u8], val: &[u8]) -> Result<bool> {
        if self.height == 0
            || self.root & MEM != 0
            || !self.mem.is_empty()
            || !self.overwrite.is_empty()
            || val.is_empty()
        {
            return Ok(false);
        }
        let r = &self.sh.region;
        let (mut ptr, mut count) = (self.root, self.count);
        for level in (1..self.height).rev() {
            // Not summed whole: the leaf's entry count checks the count
            // followed (as in `find_item`).
            let v = View::open_unsummed(r, ptr, level)?;
            let i = read::child_for_key(v.len(), |i| v.cmp_sep(i, key))?;
            (ptr, count) = (v.ptr(i)?, v.count(i)?);
        }
        let v = View::open(r, ptr, 0, count)?;
        let Ok(found) = read::search_leaf(v.len(), |i| v.cmp_key(i, key))? else {
            return Ok(false);
        };
        let (at, len) = v.value_span(found)?;
        let (first, last) = (at & !7, (at + len - 1) & !7);
        // Every word written lies in this block, past its link word (the
        // bytes around the value are written back as they are).
        if len != val.len() as u64
            || !ptr.is_multiple_of(8)
            || first < ptr + 8 + P_TABLE
            || last + 8 > node_header(r, ptr)?.end
        {
            return Ok(false);
        }
        let mut words = InPlace::new();
        for w in (first..=last).step_by(8) {
            let old = r.load64(w)?;
            let mut b = old.to_ne_bytes();
            for (i, byte) in b.iter_mut().enumerate() {
                let o = w + i as u64;
                if (at..at + len).contains(&o) {
                    *byte = val[(o - at) as usize];
                }
            }
            let new = u64::from_ne_bytes(b);
            if new != old {
                words.push((w, new));
            }
        }
        self.overwrite = words;
        Ok(true)
    }

    /// Drops the words of an [`overwrite`](Self::overwrite) not yet
    /// committed.
    pub(crate) fn cancel_overwrite(&mut self) {
        self.overwrite.clear();
    }

    /// Removes `key` from a keyed tree; returns its value.
    pub(crate) fn remove_key(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        // A search in place first: a missing key copies no node.
        if self.find_item(key)?.is_none() {
            return Ok(None);
        }
        self.remove_present(key)
    }

    /// [`remove_key`](Self::remove_key) for a caller that knows the key is
    /// there (a sorted set's member whose score it read): straight to the
    /// path copy. Still returns None if it is not.
    pub(crate) fn remove_present(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let path = self.seek_key(key)?;
        if !path.found {
            return Ok(None);
        }
        let old = self.leaf_item(&path)?.map(|(_, v)| v);
        self.take(path)?;
        Ok(old)
    }

    /// Inserts `val` at position `rank` (<= len) of a positional tree.
    pub(crate) fn insert_at(&mut self, rank: u64, val: &[u8]) -> Result<()> {
        let path = self.seek_rank(rank.min(self.count))?;
        self.put(path, &[], val, false)
    }

    /// Replaces the value at `rank`; false when out of range.
    pub(crate) fn set_at(&mut self, rank: u64, val: &[u8]) -> Result<bool> {
        if rank >= self.count {
            return Ok(false);
        }
        let path = self.seek_rank(rank)?;
        let key = self.leaf_item(&path)?.map(|(k, _)| k).unwrap_or_default();
        self.put(path, &key, val, true)?;
        Ok(true)
    }

    /// Removes and returns the item at `rank`.
    pub(crate) fn remove_at(&mut self, rank: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if rank >= self.count {
            return Ok(None);
        }
        let path = self.seek_rank(rank)?;
        let item = self.leaf_item(&path)?;
        self.take(path)?;
        Ok(item)
    }

    pub(super) fn put(&mut self, path: Path, key: &[u8], val: &[u8], replace: bool) -> Result<()> {
        let entry = leaf_entry(key, val);
        if self.height == 0 {
            let mut leaf = Node::new(0);
            leaf.insert(0, &entry);
            self.mem.push(leaf);
            self.root = MEM | (self.mem.len() - 1) as u64;
            self.height = 1;
            self.count = 1;
            return Ok(());
        }
        let (nodes, idxs) = self.edit(path)?;
        let leaf = *nodes.last().ok_or(Error::BadValue)?;
        let at = *idxs.last().ok_or(Error::BadValue)?;
        if replace {
            self.mem[leaf].replace(at, &entry);
        } else {
            self.mem[leaf].insert(at, &entry);
            self.adjust_counts(&nodes, &idxs, 1);
        }
        // A split moves entries between the path's nodes, so the path no
        // longer says where the leaf is; a split node is not small anyway.
        if self.fix_overflow(&nodes, &idxs) {
            return Ok(());
        }
        self.fix_underflow(&nodes, &idxs)
    }

    pub(super) fn take(&mut self, path: Path) -> Result<()> {
        let (nodes, idxs) = self.edit(path)?;
        let leaf = *nodes.last().ok_or(Error::BadValue)?;
        let at = *idxs.last().ok_or(Error::BadValue)?;
        self.mem[leaf].remove(at);
        self.adjust_counts(&nodes, &idxs, -1);
        self.fix_underflow(&nodes, &idxs)
    }

    /// Splits the nodes of a path that grew past `NODE_MAX`, leaf first,
    /// adding a root above a split root.
    pub(super) fn fix_overflow(&mut self, nodes: &[usize], idxs: &[usize]) -> bool {
        let mut split = false;
        for d in (0..nodes.len()).rev() {
            let me = nodes[d];
            let min = if self.mem[me].level > 0 { 4 } else { 2 };
            if self.mem[me].body.len() <= NODE_MAX || self.mem[me].len() < min {
                continue;
            }
            let node = std::mem::take(&mut self.mem[me]);
            let level = node.level;
            let mut pieces = node.chunk(NODE_FILL);
            if pieces.len() < 2 {
                self.mem[me] = pieces.pop().unwrap_or_default();
                continue;
            }
            split = true;
            let mut entries = Vec::with_capacity(pieces.len());
            let mut prev_last: Option<Vec<u8>> = None;
            for (i, mut piece) in pieces.drain(..).enumerate() {
                let sep = if !self.keyed || i == 0 {
                    Vec::new()
                } else if level == 0 {
                    separator(prev_last.as_deref().unwrap_or(&[]), piece.first_key())
                } else {
                    piece.first_key().to_vec()
                };
                if self.keyed && level == 0 {
                    prev_last = Some(piece.item(piece.len() - 1).0.to_vec());
                }
                piece.clear_first_sep();
                let count = piece.total().unwrap_or(0);
                let idx = if i == 0 {
                    self.mem[me] = piece;
                    me
                } else {
                    self.mem.push(piece);
                    self.mem.len() - 1
                };
                entries.push(inner_entry(MEM | idx as u64, count, &sep));
            }
            if d == 0 {
                let mut root = Node::new(level + 1);
                for e in &entries {
                    root.insert(root.len(), e);
                }
                self.mem.push(root);
                self.root = MEM | (self.mem.len() - 1) as u64;
                self.height += 1;
            } else {
                let (p, ci) = (nodes[d - 1], idxs[d - 1]);
                // The first piece keeps the old separator.
                let old_sep = self.mem[p].child(ci).2.to_vec();
                let (ptr, count, _) = {
                    let c = &entries[0];
                    (word(c, 0), word(c, 8), ())
                };
                self.mem[p].replace(ci, &inner_entry(ptr, count, &old_sep));
                for (k, e) in entries.iter().enumerate().skip(1) {
                    self.mem[p].insert(ci + k, e);
                }
            }
        }
        split
    }

    /// Removes emptied nodes and merges small ones into a neighbour, leaf
    /// first; then shortens the tree while its root has one child.
    pub(super) fn fix_underflow(&mut self, nodes: &[usize], idxs: &[usize]) -> Result<()> {
        for d in (1..nodes.len()).rev() {
            let (me, p, ci) = (nodes[d], nodes[d - 1], idxs[d - 1]);
            if ci >= self.mem[p].len() {
                continue;
            }
            if self.mem[me].is_empty() {
                self.mem[p].remove(ci);
                if ci == 0 {
                    self.mem[p].clear_first_sep();
                }
                continue;
            }
            if self.mem[me].body.len() >= NODE_MIN || self.mem[p].len() < 2 {
                continue;
            }
            let (l, r) = if ci + 1 < self.mem[p].len() {
                (ci, ci + 1)
            } else {
                (ci - 1, ci)
            };
            let li = self.child_mut(p, l)?;
            let ri = self.child_mut(p, r)?;
            if self.mem[li].body.len() + self.mem[ri].body.len() > NODE_FILL {
                continue;
            }
            let mut right = std::mem::take(&mut self.mem[ri]);
            if right.level > 0 && self.keyed {
                // The separator between the two moves down onto the right
                // node's first child.
                let sep = self.mem[p].child(r).2.to_vec();
                let (ptr, c, _) = right.child(0);
                right.replace(0, &inner_entry(ptr, c, &sep));
            }
            self.mem[li].append(&right);
            let (lptr, lc, _) = self.mem[p].child(l);
            let rc = self.mem[p].count(r);
            self.mem[p].set_child(l, lptr, lc + rc);
            self.mem[p].remove(r);
        }
        self.shorten()
    }

    pub(super) fn shorten(&mut self) -> Result<()> {
        loop {
            if self.height == 0 {
                return Ok(());
            }
            let root = self.node(self.root, self.height - 1, self.count)?;
            if root.is_empty() {
                self.root = 0;
                self.height = 0;
                self.count = 0;
                return Ok(());
            }
            if root.level == 0 || root.len() > 1 {
                return Ok(());
            }
            let child = root.ptr(0);
            if self.root & MEM == 0 {
                self.replaced.push(self.root);
            }
            self.root = child;
            self.height -= 1;
        }
    }

    /// Removes the items with ranks in `lo..hi`; returns how many.
    pub(crate) fn remove_range(&mut self, lo: u64, hi: u64) -> Result<u64> {
        let hi = hi.min(self.count);
        if lo >= hi {
            return Ok(0);
        }
        let path = self.seek_rank(0)?;
        let root = self.materialize(Path {
            steps: path.steps.into_iter().take(1).collect(),
            rank: 0,
            found: false,
        })?[0];
        self.remove_range_in(root, lo, hi)?;
        self.count -= hi - lo;
        self.shorten()?;
        Ok(hi - lo)
    }

    pub(super) fn remove_range_in(&mut self, me: usize, lo: u64, hi: u64) -> Result<()> {
        if self.mem[me].level == 0 {
            let n = self.mem[me].len();
            self.mem[me].remove_span((lo as usize).min(n), (hi as usize).min(n));
            return Ok(());
        }
        let mut base = 0u64;
        let mut spans = Vec::new();
        for i in 0..self.mem[me].len() {
            let c = self.mem[me].count(i);
            spans.push((base, c));
            base += c;
        }
        for i in (0..spans.len()).rev() {
            let (b, c) = spans[i];
            if b + c <= lo || b >= hi {
                continue;
            }
            if lo <= b && b + c <= hi {
                let (ptr, count, _) = self.mem[me].child(i);
                let level = self.mem[me].level - 1;
                self.drop_subtree(ptr, level, count)?;
                self.mem[me].remove(i);
                continue;
            }
            let ci = self.child_mut(me, i)?;
            self.remove_range_in(ci, lo.saturating_sub(b), (hi - b).min(c))?;
            let removed = (hi.min(b + c)) - lo.max(b);
            let ptr = self.mem[me].ptr(i);
            if self.mem[ci].is_empty() {
                self.mem[me].remove(i);
            } else {
                self.mem[me].set_child(i, ptr, c - removed);
            }
        }
        self.mem[me].clear_first_sep();
        Ok(())
    }

    /// Lists every segment block of a subtree leaving the tree.
    pub(super) fn drop_subtree(&mut self, ptr: u64, level: u8, count: u64) -> Result<()> {
        let node = if ptr & MEM != 0 {
            std::mem::take(&mut self.mem[(ptr & !MEM) as usize])
        } else {
            self.replaced.push(ptr);
            if level == 0 {
                self.cache.get_mut().remove(&ptr);
                return Ok(());
            }
            self.take_node(ptr, None, level, count)?
        };
        if node.level > 0 {
            for i in 0..node.len() {
                let (p, c, _) = node.child(i);
                self.drop_subtree(p, level - 1, c)?;
            }
        }
        Ok(())
    }

    /// Writes every node changed in memory into a new block: `alloc(sizes)`
    /// allocates the blocks (payload sizes, children before parents),
    /// `write(block, payload)` fills one. An inner node whose entries
    /// changed only in child pointers and counts keeps its block: the
    /// returned words are to be written, logged, in the transaction that
    /// publishes the tree. Afterwards the tree names only blocks.
    pub(crate) fn commit(
        &mut self,
        alloc: &mut dyn FnMut(&[u64]) -> Result<Vec<u64>>,
        write: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<InPlace> {
        let mut words = std::mem::take(&mut self.overwrite);
        if self.root & MEM != 0 && !words.is_empty() {
            // An overwrite is only for a tree that has no other change.
            return bad();
        }
        if self.root & MEM != 0 {
            let mut order = Vec::new();
            self.post_order((self.root & !MEM) as usize, &mut order);
            let mut in_place: Vec<bool> = order
                .iter()
                .map(|&i| self.mem[i].only_children_changed())
                .collect();
            let budget: usize = order
                .iter()
                .zip(&in_place)
                .filter(|(_, &keep)| keep)
                .map(|(&i, _)| 2 * self.mem[i].touched.len())
                .sum();
            if budget > IN_PLACE_WORDS {
                in_place.iter_mut().for_each(|k| *k = false);
            }
            let sizes: Vec<u64> = order
                .iter()
                .zip(&in_place)
                .filter(|(_, &keep)| !keep)
                .map(|(&i, _)| self.mem[i].payload_len())
                .collect();
            let mut blocks = alloc(&sizes)?.into_iter();
            if blocks.len() != sizes.len() {
                return bad();
            }
            let mut block_of = vec![0u64; self.mem.len()];
            let mut kept = Vec::new();
            for (&i, &keep) in order.iter().zip(&in_place) {
                block_of[i] = match (&self.mem[i].origin, keep) {
                    (Some(o), true) => {
                        kept.push(o.blk);
                        o.blk
                    }
                    _ => blocks.next().ok_or(Error::BadValue)?,
                };
            }
            for (&i, &keep) in order.iter().zip(&in_place) {
                let mut node = std::mem::take(&mut self.mem[i]);
                for k in 0..node.mem_child_slots() {
                    let c = node.mem_child_slot(k);
                    let (ptr, count) = (node.ptr(c), node.count(c));
                    if ptr & MEM != 0 {
                        node.set_child(c, block_of[(ptr & !MEM) as usize], count);
                    }
                }
                match (&node.origin, keep) {
                    (Some(o), true) => {
                        for &c in &node.touched {
                            let at = node.start(c as usize);
                            for w in [at, at + 8] {
                                let new = word(&node.body, w);
                                let off = o.body_at + w as u64;
                                if new != self.sh.region.load64(off)? {
                                    words.push((off, new));
                                }
                            }
                        }
                    }
                    _ => write(block_of[i], &node.payload())?,
                }
            }
            // A node changed in place stays in the tree.
            self.replaced.retain(|b| !kept.contains(b));
            self.root = block_of[(self.root & !MEM) as usize];
        }
        self.mem.clear();
        self.cache.get_mut().clear();
        Ok(words)
    }

    /// The mem nodes under mem node `idx`, children before parents.
    pub(super) fn post_order(&self, idx: usize, out: &mut Vec<usize>) {
        let node = &self.mem[idx];
        for k in 0..node.mem_child_slots() {
            let ptr = node.ptr(node.mem_child_slot(k));
            if ptr & MEM != 0 {
                self.post_order((ptr & !MEM) as usize, out);
            }
        }
        out.push(idx);
    }

    /// Every item in order, as owned pairs.
    pub(crate) fn items(&self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::with_capacity(self.count as usize);
        self.visit(0, self.count, false, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }
}
