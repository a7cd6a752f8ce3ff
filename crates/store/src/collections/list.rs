//! Lists.

use super::codec::{self, Reader, TAG_ITEMS};
use super::packed::Sequence;
use super::tree::{Edge, InPlace, Tree};
use super::{Collection, Journal, Segment};
use crate::error::{Error, Result};
use crate::keyspace::entry::ValueType;

/// A list longer than this, or bigger than `COMPACT_BYTES`, is paged.
const COMPACT_ITEMS: usize = 128;
const COMPACT_BYTES: usize = 8 * 1024;

/// A list value. Indexes are 0-based from the head; callers resolve Redis's
/// negative indexes first.
#[derive(Debug)]
pub struct List {
    body: Body,
    changed: bool,
    journal: Journal,
    /// Pushes at one end of a paged list that go in place when the write
    /// is published (see the tree's `edge` module); every other change
    /// applies them by copying first.
    edge: Option<Edge>,
}

#[derive(Debug)]
enum Body {
    /// A small list, as places in one copy of its bytes (packed.rs).
    Compact(Sequence),
    /// A positional tree: items in list order.
    Paged(Tree),
}

impl Default for List {
    fn default() -> Self {
        List {
            body: Body::Compact(Sequence::default()),
            changed: false,
            journal: Journal::default(),
            edge: None,
        }
    }
}

impl Collection for List {
    const TYPE: ValueType = ValueType::List;
    const KEYED: &'static [bool] = &[false];

    fn empty() -> Self {
        List::default()
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut r, tag, n) = Reader::open(bytes)?;
        if tag != TAG_ITEMS {
            return Err(Error::BadValue);
        }
        let items = Sequence::parse(&mut r, n)?;
        Ok(List {
            body: Body::Compact(items),
            changed: false,
            journal: Journal::default(),
            edge: None,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        if let Body::Compact(items) = &self.body {
            items.encode(out, TAG_ITEMS);
        }
    }

    fn encode_image(&self, out: &mut Vec<u8>) -> Result<()> {
        if let Some(whole) = self.with_pushes()? {
            return whole.encode_image(out);
        }
        match &self.body {
            Body::Compact(_) => self.encode(out),
            Body::Paged(tree) => {
                let items = tree.items()?;
                codec::header(out, TAG_ITEMS, items.len());
                for (_, item) in &items {
                    codec::put_bytes(out, item);
                }
            }
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        let (pushed, popped) = self
            .edge
            .as_ref()
            .map_or((0, 0), |e| (e.items().len() as u64, e.pops() as u64));
        match &self.body {
            Body::Compact(items) => items.len() as u64,
            Body::Paged(t) => t.len() + pushed - popped,
        }
    }

    fn changed(&self) -> bool {
        self.changed
    }

    fn encoding_name(&self) -> &'static str {
        "quicklist"
    }

    fn from_trees(mut trees: Vec<Tree>) -> Result<Self> {
        let tree = trees.pop().ok_or(Error::BadValue)?;
        Ok(List {
            body: Body::Paged(tree),
            changed: false,
            journal: Journal::default(),
            edge: None,
        })
    }

    fn settle(&mut self, seg: &Segment) -> Result<()> {
        if self.len() as usize <= COMPACT_ITEMS / 2 {
            self.apply_pushes()?;
        }
        match &mut self.body {
            Body::Compact(items) => {
                if items.len() > COMPACT_ITEMS || items.data_bytes() > COMPACT_BYTES {
                    let tree =
                        Tree::build(seg.0.clone(), false, items.iter().map(|i| (&[][..], i)));
                    self.body = Body::Paged(tree);
                }
            }
            // With pushes waiting (more than half the compact limit in
            // all) the tree alone may be short: it stays paged.
            Body::Paged(tree) if self.edge.is_none() => {
                if tree.len() as usize <= COMPACT_ITEMS / 2 {
                    let items = Sequence::from_items(tree.items()?.iter().map(|(_, v)| v));
                    if items.data_bytes() <= COMPACT_BYTES / 2 {
                        self.body = Body::Compact(items);
                    }
                }
            }
            Body::Paged(_) => {}
        }
        Ok(())
    }

    fn trees_mut(&mut self) -> Vec<&mut Tree> {
        match &mut self.body {
            Body::Compact(_) => Vec::new(),
            Body::Paged(t) => vec![t],
        }
    }

    fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }

    fn growth_block(&self) -> Option<(u64, bool)> {
        self.edge.as_ref().map(|e| (e.leaf(), e.pops() > 0))
    }

    fn take_growth(&mut self, in_place: bool) -> Result<Option<InPlace>> {
        if !in_place {
            self.apply_pushes()?;
            return Ok(None);
        }
        match (self.edge.take(), &mut self.body) {
            (Some(edge), Body::Paged(t)) => t.grow(&edge).map(Some),
            _ => Ok(None),
        }
    }
}

impl List {
    /// Applies the pushes waiting to go in place by copying (before any
    /// other change, or when the write cannot publish them in place).
    fn apply_pushes(&mut self) -> Result<()> {
        if let (Some(edge), Body::Paged(t)) = (self.edge.take(), &mut self.body) {
            for _ in 0..edge.pops() {
                let last = t.len().saturating_sub(1);
                t.remove_at(if edge.tail() { last } else { 0 })?;
            }
            for item in edge.items() {
                t.push_end(edge.tail(), item)?;
            }
        }
        Ok(())
    }

    /// With pushes waiting: the whole list in process memory, for a read
    /// in the same write (rare; the pushes are not in the tree yet).
    fn with_pushes(&self) -> Result<Option<List>> {
        let (Some(edge), Body::Paged(t)) = (&self.edge, &self.body) else {
            return Ok(None);
        };
        let mut items = Sequence::from_items(t.items()?.iter().map(|(_, v)| v));
        let n = items.len().saturating_sub(edge.pops());
        if edge.tail() {
            items.keep_range(0, n);
        } else {
            items.keep_range(items.len() - n, items.len());
        }
        for item in edge.items() {
            if edge.tail() {
                items.push_back(item);
            } else {
                items.push_front(item);
            }
        }
        Ok(Some(List {
            body: Body::Compact(items),
            ..List::default()
        }))
    }

    /// Removes the element at the tail (else the head) of a paged list in
    /// place when its end leaf stores it last and keeps others; None when
    /// that cannot be (the caller then removes it by copying).
    fn pop_paged(&mut self, tail: bool) -> Result<Option<Vec<u8>>> {
        let Body::Paged(t) = &mut self.body else {
            return Ok(None);
        };
        let fresh = match &self.edge {
            Some(edge) if edge.tail() == tail && edge.items().is_empty() => None,
            Some(_) => return Ok(None),
            None => match t.edge(tail)? {
                Some(edge) => Some(edge),
                None => return Ok(None),
            },
        };
        if let Some(edge) = fresh {
            self.edge = Some(edge);
        }
        let Some(edge) = &mut self.edge else {
            return Ok(None);
        };
        let item = edge.pop(t.region())?;
        if edge.pops() == 0 && edge.items().is_empty() {
            self.edge = None;
        }
        Ok(item)
    }

    /// Adds an element at the tail (else the head) of a paged list: in
    /// place when its end leaf has room, else by copying.
    fn push_paged(&mut self, tail: bool, item: &[u8]) -> Result<()> {
        let Body::Paged(t) = &mut self.body else {
            return Ok(());
        };
        match &mut self.edge {
            Some(edge) => {
                if edge.tail() == tail && edge.add(item) {
                    return Ok(());
                }
                self.apply_pushes()?;
            }
            None => {
                if let Some(mut edge) = t.edge(tail)? {
                    if edge.add(item) {
                        self.edge = Some(edge);
                        return Ok(());
                    }
                }
            }
        }
        match &mut self.body {
            Body::Paged(t) => t.push_end(tail, item),
            Body::Compact(_) => Ok(()),
        }
    }

    /// The element at `index`, if there is one.
    pub fn get(&self, index: u64) -> Result<Option<Vec<u8>>> {
        if let Some(whole) = self.with_pushes()? {
            return whole.get(index);
        }
        match &self.body {
            Body::Compact(items) => Ok(usize::try_from(index)
                .ok()
                .and_then(|i| items.get(i))
                .map(<[u8]>::to_vec)),
            Body::Paged(t) => Ok(t.nth(index)?.map(|(_, v)| v)),
        }
    }

    /// The elements in `start..end` (clamped to the list).
    pub fn range(&self, start: u64, end: u64) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        self.for_each_in(start, end, |x| out.push(x.to_vec()))?;
        Ok(out)
    }

    /// Adds an element at the head.
    pub fn push_front(&mut self, item: &[u8]) -> Result<()> {
        self.changed = true;
        self.journal.push(false, item);
        match &mut self.body {
            Body::Compact(items) => items.push_front(item),
            Body::Paged(_) => self.push_paged(false, item)?,
        }
        Ok(())
    }

    /// Adds an element at the tail.
    pub fn push_back(&mut self, item: &[u8]) -> Result<()> {
        self.changed = true;
        self.journal.push(true, item);
        match &mut self.body {
            Body::Compact(items) => items.push_back(item),
            Body::Paged(_) => self.push_paged(true, item)?,
        }
        Ok(())
    }

    /// Removes and returns the head element.
    pub fn pop_front(&mut self) -> Result<Option<Vec<u8>>> {
        self.remove(0)
    }

    /// Removes and returns the tail element.
    pub fn pop_back(&mut self) -> Result<Option<Vec<u8>>> {
        match self.len() {
            0 => Ok(None),
            n => self.remove(n - 1),
        }
    }

    /// Replaces the element at `index`; false when out of range.
    pub fn set(&mut self, index: u64, item: &[u8]) -> Result<bool> {
        self.apply_pushes()?;
        let done = match &mut self.body {
            Body::Compact(items) => usize::try_from(index).is_ok_and(|i| items.set(i, item)),
            Body::Paged(t) => t.set_at(index, item)?,
        };
        if done {
            self.changed = true;
            self.journal.opaque();
        }
        Ok(done)
    }

    /// Inserts `item` so that it becomes the element at `index` (`index` ≤ len).
    pub fn insert(&mut self, index: u64, item: &[u8]) -> Result<()> {
        self.apply_pushes()?;
        let len = self.len();
        let index = index.min(len);
        match index {
            0 => self.journal.push(false, item),
            i if i == len => self.journal.push(true, item),
            _ => self.journal.opaque(),
        }
        match &mut self.body {
            Body::Compact(items) => items.insert(index as usize, item),
            Body::Paged(t) => t.insert_at(index, item)?,
        }
        self.changed = true;
        Ok(())
    }

    /// Removes and returns the element at `index`.
    pub fn remove(&mut self, index: u64) -> Result<Option<Vec<u8>>> {
        let len = self.len();
        if len > 0 && (index == 0 || index + 1 == len) {
            if let Some(item) = self.pop_paged(index != 0)? {
                self.changed = true;
                self.journal.pop(index != 0, 1);
                return Ok(Some(item));
            }
        }
        self.apply_pushes()?;
        let len = self.len();
        let item = match &mut self.body {
            Body::Compact(items) => usize::try_from(index).ok().and_then(|i| items.remove(i)),
            Body::Paged(t) => t.remove_at(index)?.map(|(_, v)| v),
        };
        if item.is_some() {
            self.changed = true;
            match index {
                0 => self.journal.pop(false, 1),
                i if i + 1 == len => self.journal.pop(true, 1),
                _ => self.journal.opaque(),
            }
        }
        Ok(item)
    }

    /// Calls `f` with each element's index (from the head) and bytes, walking
    /// from the head, or from the tail when `from_tail`, until `f` returns
    /// false. LPOS, LINSERT and LREM search with it without copying the
    /// elements they pass over.
    pub fn scan(&self, from_tail: bool, mut f: impl FnMut(u64, &[u8]) -> bool) -> Result<()> {
        if let Some(whole) = self.with_pushes()? {
            return whole.scan(from_tail, f);
        }
        match &self.body {
            Body::Compact(items) => {
                if from_tail {
                    for (i, item) in items.iter().enumerate().rev() {
                        if !f(i as u64, item) {
                            break;
                        }
                    }
                } else {
                    for (i, item) in items.iter().enumerate() {
                        if !f(i as u64, item) {
                            break;
                        }
                    }
                }
            }
            Body::Paged(t) => {
                let n = t.len();
                let mut i = if from_tail { n } else { 0 };
                t.visit(0, n, from_tail, &mut |_, v| {
                    let at = if from_tail {
                        i -= 1;
                        i
                    } else {
                        i += 1;
                        i - 1
                    };
                    f(at, v)
                })?;
            }
        }
        Ok(())
    }

    /// Calls `f` with each element in `start..end` (clamped to the list), in
    /// order: LRANGE writes them into its reply without copying them first.
    pub fn for_each_in(&self, start: u64, end: u64, mut f: impl FnMut(&[u8])) -> Result<()> {
        if let Some(whole) = self.with_pushes()? {
            return whole.for_each_in(start, end, f);
        }
        let len = self.len();
        let (start, end) = (start.min(len), end.min(len));
        if start >= end {
            return Ok(());
        }
        match &self.body {
            Body::Compact(items) => {
                for item in items.range(start as usize..end as usize) {
                    f(item);
                }
            }
            Body::Paged(t) => t.visit(start, end, false, &mut |_, v| {
                f(v);
                true
            })?,
        }
        Ok(())
    }

    /// Removes the elements equal to `item` (LREM): at most `limit` of them
    /// (0 = all), the first ones from the head, or from the tail when
    /// `from_tail`. Returns how many it removed. One pass over the list
    /// whatever the number removed (two when counting from the tail).
    pub fn remove_equal(&mut self, item: &[u8], limit: u64, from_tail: bool) -> Result<u64> {
        self.apply_pushes()?;
        if let Body::Paged(_) = &self.body {
            let mut doomed = Vec::new();
            self.scan(from_tail, |at, v| {
                if v == item {
                    doomed.push(at);
                }
                limit == 0 || (doomed.len() as u64) < limit
            })?;
            // Highest index first, so the others keep their places.
            doomed.sort_unstable_by(|a, b| b.cmp(a));
            if let Body::Paged(t) = &mut self.body {
                for &at in &doomed {
                    t.remove_at(at)?;
                }
            }
            if !doomed.is_empty() {
                self.changed = true;
                self.journal.opaque();
            }
            return Ok(doomed.len() as u64);
        }
        let Body::Compact(items) = &mut self.body else {
            return Ok(0);
        };
        let matches = items.iter().filter(|&x| x == item).count() as u64;
        let remove = if limit == 0 {
            matches
        } else {
            limit.min(matches)
        };
        if remove == 0 {
            return Ok(0);
        }
        // The matches to keep come before the removed ones (from the tail) or
        // after them (from the head), in head-to-tail order.
        let (first, last) = if from_tail {
            (matches - remove, matches)
        } else {
            (0, remove)
        };
        let mut seen = 0u64;
        items.retain(|x| {
            if x != item {
                return true;
            }
            let ordinal = seen;
            seen += 1;
            !(first..last).contains(&ordinal)
        });
        self.changed = true;
        self.journal.opaque();
        Ok(remove)
    }

    /// Keeps only the elements in `start..end` (LTRIM).
    pub fn retain_range(&mut self, start: u64, end: u64) -> Result<()> {
        self.apply_pushes()?;
        let len = self.len();
        let (start, end) = (start.min(len), end.min(len).max(start.min(len)));
        if start == 0 && end == len {
            return Ok(());
        }
        match &mut self.body {
            Body::Compact(items) => {
                items.keep_range(start as usize, end as usize);
            }
            Body::Paged(t) => {
                t.remove_range(end, len)?;
                t.remove_range(0, start)?;
            }
        }
        // The same as popping from both ends, in this order.
        self.journal.pop(true, len - end);
        self.journal.pop(false, start);
        self.changed = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> List {
        let mut l = List::empty();
        for i in items {
            l.push_back(i.as_bytes()).unwrap();
        }
        l
    }

    fn items(l: &List) -> Vec<String> {
        l.range(0, l.len())
            .unwrap()
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn scan_walks_either_way_and_stops() {
        let l = list(&["a", "b", "c"]);
        let mut seen = Vec::new();
        l.scan(true, |i, x| {
            seen.push((i, x.to_vec()));
            i > 1
        })
        .unwrap();
        assert_eq!(seen, [(2, b"c".to_vec()), (1, b"b".to_vec())]);
        let mut n = 0;
        l.scan(false, |_, _| {
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 3);
    }

    #[test]
    fn for_each_in_clamps() {
        let l = list(&["a", "b", "c"]);
        let mut seen = Vec::new();
        l.for_each_in(1, 10, |x| seen.push(x.to_vec())).unwrap();
        assert_eq!(seen, [b"b".to_vec(), b"c".to_vec()]);
        seen.clear();
        l.for_each_in(2, 1, |x| seen.push(x.to_vec())).unwrap();
        assert!(seen.is_empty());
    }

    #[test]
    fn remove_equal_from_either_end() {
        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(l.remove_equal(b"a", 2, true).unwrap(), 2);
        assert_eq!(items(&l), ["a", "b", "c"]);
        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(l.remove_equal(b"a", 2, false).unwrap(), 2);
        assert_eq!(items(&l), ["b", "c", "a"]);
        assert_eq!(l.remove_equal(b"a", 0, false).unwrap(), 1);
        assert_eq!(items(&l), ["b", "c"]);
        let mut bytes = Vec::new();
        list(&["x"]).encode(&mut bytes);
        let mut l = List::decode(&bytes).unwrap();
        assert_eq!(l.remove_equal(b"y", 0, false).unwrap(), 0);
        assert!(!l.changed());
        assert_eq!(l.remove_equal(b"x", 9, true).unwrap(), 1);
        assert!(l.changed() && l.is_empty());
    }
}
