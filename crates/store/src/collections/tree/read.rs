//! Reading a tree: searches by key or by rank, and visits in order, over
//! nodes in process memory or published in the segment.

use super::*;

/// One step of a path from the root: the node (its pointer, and a copy
/// when it came from the segment) and the entry index taken in it.
pub(super) struct Step {
    pub(super) ptr: u64,
    pub(super) copy: Option<Rc<Node>>,
    pub(super) idx: usize,
}

/// A node as a read-only search sees it: in process memory (changed, or
/// read whole earlier in the command), or a [`View`] of a published one.
pub(super) enum Src<'a> {
    Mem(&'a Node),
    Read(Rc<Node>),
    Shm(View<'a>),
}

impl Src<'_> {
    pub(super) fn node(&self) -> Option<&Node> {
        match self {
            Src::Mem(n) => Some(n),
            Src::Read(n) => Some(n),
            Src::Shm(_) => None,
        }
    }

    pub(super) fn len(&self) -> usize {
        match (self.node(), self) {
            (Some(n), _) => n.len(),
            (None, Src::Shm(v)) => v.len(),
            _ => 0,
        }
    }

    pub(super) fn ptr(&self, i: usize) -> Result<u64> {
        match (self.node(), self) {
            (Some(n), _) => Ok(n.ptr(i)),
            (None, Src::Shm(v)) => v.ptr(i),
            _ => bad(),
        }
    }

    pub(super) fn count(&self, i: usize) -> Result<u64> {
        match (self.node(), self) {
            (Some(n), _) => Ok(n.count(i)),
            (None, Src::Shm(v)) => v.count(i),
            _ => bad(),
        }
    }

    pub(super) fn cmp_sep(&self, i: usize, key: &[u8]) -> Result<std::cmp::Ordering> {
        match (self.node(), self) {
            (Some(n), _) => Ok(n.child(i).2.cmp(key)),
            (None, Src::Shm(v)) => v.cmp_sep(i, key),
            _ => bad(),
        }
    }

    pub(super) fn cmp_key(&self, i: usize, key: &[u8]) -> Result<std::cmp::Ordering> {
        match (self.node(), self) {
            (Some(n), _) => Ok(n.item(i).0.cmp(key)),
            (None, Src::Shm(v)) => v.cmp_key(i, key),
            _ => bad(),
        }
    }

    pub(super) fn item(&self, i: usize) -> Result<(Vec<u8>, Vec<u8>)> {
        match (self.node(), self) {
            (Some(n), _) => {
                let (k, v) = n.item(i);
                Ok((k.to_vec(), v.to_vec()))
            }
            (None, Src::Shm(v)) => v.item(i),
            _ => bad(),
        }
    }
}

/// What a read-only search found: the rank of the position, and the item
/// there when the key matched (or the rank was in range).
pub(super) struct Found {
    pub(super) rank: u64,
    pub(super) item: Option<(Vec<u8>, Vec<u8>)>,
}

/// A node as a search sees it: changed in process memory, or read from the
/// segment (shared with the tree's cache).
pub(super) enum Loaded<'a> {
    Mem(&'a Node),
    Read(Rc<Node>),
}

impl Deref for Loaded<'_> {
    type Target = Node;

    fn deref(&self) -> &Node {
        match self {
            Loaded::Mem(n) => n,
            Loaded::Read(n) => n,
        }
    }
}

impl Loaded<'_> {
    pub(super) fn into_copy(self) -> Option<Rc<Node>> {
        match self {
            Loaded::Mem(_) => None,
            Loaded::Read(n) => Some(n),
        }
    }
}

/// Where a search ended: the path, the rank of the leaf position, and
/// whether the key was there.
pub(super) struct Path {
    pub(super) steps: Vec<Step>,
    pub(super) rank: u64,
    pub(super) found: bool,
}

impl Tree {
    /// Node `ptr` as this command already read it, if it still checks out
    /// at `level` with `count` items.
    pub(super) fn cached(&self, ptr: u64, level: u8, count: u64) -> Option<Rc<Node>> {
        let cache = self.cache.borrow();
        let n = cache.get(&ptr)?;
        (n.level == level && n.total() == Some(count)).then(|| n.clone())
    }

    pub(super) fn node(&self, ptr: u64, level: u8, count: u64) -> Result<Loaded<'_>> {
        if ptr & MEM != 0 {
            return match self.mem.get((ptr & !MEM) as usize) {
                Some(n) => Ok(Loaded::Mem(n)),
                None => bad(),
            };
        }
        if let Some(n) = self.cached(ptr, level, count) {
            return Ok(Loaded::Read(n));
        }
        let n = Rc::new(read_node(&self.sh.region, ptr, level, count)?);
        self.cache.borrow_mut().insert(ptr, n.clone());
        Ok(Loaded::Read(n))
    }

    /// Takes the segment node `ptr` out of the cache to change it.
    pub(super) fn take_node(
        &mut self,
        ptr: u64,
        copy: Option<Rc<Node>>,
        level: u8,
        count: u64,
    ) -> Result<Node> {
        let rc = match copy.or_else(|| self.cache.get_mut().remove(&ptr)) {
            Some(rc) => rc,
            None => Rc::new(read_node(&self.sh.region, ptr, level, count)?),
        };
        self.cache.get_mut().remove(&ptr);
        Ok(Rc::try_unwrap(rc).unwrap_or_else(|rc| (*rc).clone()))
    }

    // ---------- searching ----------

    pub(super) fn src(&self, ptr: u64, level: u8, count: u64) -> Result<Src<'_>> {
        match self.src_mem(ptr, level, count)? {
            Some(n) => Ok(n),
            None => Ok(Src::Shm(View::open(&self.sh.region, ptr, level, count)?)),
        }
    }

    /// Finds `key` without changing nodes or parsing them whole: its rank
    /// (where it is or would go) and its item when it is there.
    pub(super) fn find_key(&self, key: &[u8]) -> Result<Found> {
        let mut rank = 0;
        if self.height == 0 {
            return Ok(Found { rank, item: None });
        }
        let (mut ptr, mut count) = (self.root, self.count);
        for level in (0..self.height).rev() {
            let node = self.src(ptr, level, count)?;
            if level == 0 {
                return Ok(match search_leaf(node.len(), |i| node.cmp_key(i, key))? {
                    Ok(at) => Found {
                        rank: rank + at as u64,
                        item: Some(node.item(at)?),
                    },
                    Err(at) => Found {
                        rank: rank + at as u64,
                        item: None,
                    },
                });
            }
            let idx = child_for_key(node.len(), |i| node.cmp_sep(i, key))?;
            for i in 0..idx {
                rank += node.count(i)?;
            }
            (ptr, count) = (node.ptr(idx)?, node.count(idx)?);
        }
        bad()
    }

    /// The item under `key`, without changing nodes, parsing them whole or
    /// working out its rank: what a membership test or an upsert needs.
    /// An inner node read in place is not summed whole (the search reads
    /// no count but the one it follows, which the leaf's entry count then
    /// checks); every slot and length it reads is checked as any view's.
    pub(super) fn find_item(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.height == 0 {
            return Ok(None);
        }
        let (mut ptr, mut count) = (self.root, self.count);
        for level in (1..self.height).rev() {
            let node = match self.src_mem(ptr, level, count)? {
                Some(n) => n,
                None => Src::Shm(View::open_unsummed(&self.sh.region, ptr, level)?),
            };
            let idx = child_for_key(node.len(), |i| node.cmp_sep(i, key))?;
            (ptr, count) = (node.ptr(idx)?, node.count(idx)?);
        }
        let node = self.src(ptr, 0, count)?;
        match search_leaf(node.len(), |i| node.cmp_key(i, key))? {
            Ok(at) => node.item(at).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Node `ptr` if this command holds it in process memory (changed, or
    /// read whole earlier); None for a node only published.
    fn src_mem(&self, ptr: u64, level: u8, count: u64) -> Result<Option<Src<'_>>> {
        if ptr & MEM != 0 {
            return match self.mem.get((ptr & !MEM) as usize) {
                Some(n) => Ok(Some(Src::Mem(n))),
                None => bad(),
            };
        }
        Ok(self.cached(ptr, level, count).map(Src::Read))
    }

    /// The item at `rank` (< len), without changing nodes.
    pub(super) fn find_rank(&self, rank: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if rank >= self.count {
            return Ok(None);
        }
        let (mut ptr, mut count, mut left) = (self.root, self.count, rank);
        for level in (0..self.height).rev() {
            let node = self.src(ptr, level, count)?;
            if level == 0 {
                return node.item(left as usize).map(Some);
            }
            let mut i = 0;
            loop {
                let c = node.count(i)?;
                if left < c || i + 1 >= node.len() {
                    (ptr, count) = (node.ptr(i)?, c);
                    break;
                }
                left -= c;
                i += 1;
            }
        }
        bad()
    }

    /// Descends to `key` (keyed trees): the leaf position where it is or
    /// would go, and its rank.
    pub(super) fn seek_key(&self, key: &[u8]) -> Result<Path> {
        let mut path = Path {
            steps: Vec::with_capacity(self.height as usize),
            rank: 0,
            found: false,
        };
        if self.height == 0 {
            return Ok(path);
        }
        let (mut ptr, mut count) = (self.root, self.count);
        for level in (0..self.height).rev() {
            let node = self.node(ptr, level, count)?;
            let idx;
            if level == 0 {
                let mut lo = 0;
                let mut hi = node.len();
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    match node.item(mid).0.cmp(key) {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Equal => {
                            path.found = true;
                            lo = mid;
                            break;
                        }
                        std::cmp::Ordering::Greater => hi = mid,
                    }
                }
                idx = lo;
                path.rank += idx as u64;
            } else {
                // The last child whose separator is <= key.
                let (mut lo, mut hi) = (1, node.len());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if node.child(mid).2 <= key {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                idx = lo - 1;
                path.rank += (0..idx).map(|i| node.count(i)).sum::<u64>();
            }
            let next = if level > 0 {
                let (p, c, _) = node.child(idx);
                Some((p, c))
            } else {
                None
            };
            let copy = node.into_copy();
            path.steps.push(Step { ptr, copy, idx });
            if let Some((p, c)) = next {
                (ptr, count) = (p, c);
            }
        }
        Ok(path)
    }

    /// Descends to rank `rank` (<= len; len is the position after the last).
    pub(super) fn seek_rank(&self, rank: u64) -> Result<Path> {
        let mut path = Path {
            steps: Vec::with_capacity(self.height as usize),
            rank,
            found: rank < self.count,
        };
        if self.height == 0 {
            return Ok(path);
        }
        let (mut ptr, mut count, mut left) = (self.root, self.count, rank.min(self.count));
        for level in (0..self.height).rev() {
            let node = self.node(ptr, level, count)?;
            let idx;
            let mut next = None;
            if level == 0 {
                idx = (left as usize).min(node.len());
            } else {
                let mut i = 0;
                loop {
                    let (p, c) = (node.ptr(i), node.count(i));
                    if left < c || i + 1 == node.len() {
                        next = Some((p, c));
                        break;
                    }
                    left -= c;
                    i += 1;
                }
                idx = i;
            }
            let copy = node.into_copy();
            path.steps.push(Step { ptr, copy, idx });
            if let Some((p, c)) = next {
                (ptr, count) = (p, c);
            }
        }
        Ok(path)
    }

    pub(super) fn leaf_item(&self, path: &Path) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(last) = path.steps.last() else {
            return Ok(None);
        };
        let node = match &last.copy {
            Some(n) => Loaded::Read(n.clone()),
            None => self.node(last.ptr, 0, 0)?,
        };
        if last.idx >= node.len() {
            return Ok(None);
        }
        let (k, v) = node.item(last.idx);
        Ok(Some((k.to_vec(), v.to_vec())))
    }

    /// The value under `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.find_item(key)?.map(|(_, v)| v))
    }

    /// The rank of `key`, if it is there.
    pub(crate) fn rank_of(&self, key: &[u8]) -> Result<Option<u64>> {
        let found = self.find_key(key)?;
        Ok(found.item.is_some().then_some(found.rank))
    }

    /// How many keys are below `key` (at or below it when `inclusive`).
    pub(crate) fn count_below(&self, key: &[u8], inclusive: bool) -> Result<u64> {
        let found = self.find_key(key)?;
        Ok(found.rank + u64::from(inclusive && found.item.is_some()))
    }

    /// The item at `rank`.
    pub(crate) fn nth(&self, rank: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.find_rank(rank)
    }

    /// Calls `f(key, value)` for the items with ranks in `lo..hi`, in order
    /// (backwards when `rev`), until it returns false.
    pub(crate) fn visit(
        &self,
        lo: u64,
        hi: u64,
        rev: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let hi = hi.min(self.count);
        if lo >= hi {
            return Ok(());
        }
        self.visit_node(self.root, self.height - 1, self.count, 0, lo, hi, rev, f)
            .map(|_| ())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn visit_node(
        &self,
        ptr: u64,
        level: u8,
        count: u64,
        base: u64,
        lo: u64,
        hi: u64,
        rev: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool> {
        let node = self.node(ptr, level, count)?;
        let n = node.len();
        if level == 0 {
            let from = lo.saturating_sub(base) as usize;
            let to = ((hi - base) as usize).min(n);
            let mut go = |i: usize| {
                let (k, v) = node.item(i);
                f(k, v)
            };
            if rev {
                for i in (from..to).rev() {
                    if !go(i) {
                        return Ok(false);
                    }
                }
            } else {
                for i in from..to {
                    if !go(i) {
                        return Ok(false);
                    }
                }
            }
            return Ok(true);
        }
        let mut starts = Vec::with_capacity(n);
        let mut at = base;
        for i in 0..n {
            starts.push(at);
            at += node.count(i);
        }
        let order: Box<dyn Iterator<Item = usize>> = if rev {
            Box::new((0..n).rev())
        } else {
            Box::new(0..n)
        };
        for i in order {
            let (p, c) = (node.ptr(i), node.count(i));
            let b = starts[i];
            if b + c <= lo || b >= hi {
                continue;
            }
            if !self.visit_node(p, level - 1, c, b, lo, hi, rev, f)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The entry of an inner node of `len` entries whose child holds `key`:
/// the last one whose separator (`cmp_sep(i)`: the separator against the
/// key) is not above it; entry 0 has none.
pub(super) fn child_for_key(
    len: usize,
    cmp_sep: impl Fn(usize) -> Result<std::cmp::Ordering>,
) -> Result<usize> {
    let (mut lo, mut hi) = (1, len);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if cmp_sep(mid)? != std::cmp::Ordering::Greater {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo - 1)
}

/// Where `key` is among a leaf's `len` sorted keys (`cmp_key(i)`: key `i`
/// against it): `Ok(i)` when it is there, `Err(i)` where it would go.
pub(super) fn search_leaf(
    len: usize,
    cmp_key: impl Fn(usize) -> Result<std::cmp::Ordering>,
) -> Result<std::result::Result<usize, usize>> {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = (lo + hi) / 2;
        match cmp_key(mid)? {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Equal => return Ok(Ok(mid)),
            std::cmp::Ordering::Greater => hi = mid,
        }
    }
    Ok(Err(lo))
}
