//! Hooks for tests that need a process to die in a precise state. Not part of
//! the API: hidden from the docs, and nothing in the store calls them.

use crate::error::Result;
use crate::keyspace::handle::Handle;
use crate::segment::layout::H_ALLOC_LOCK;

/// Takes the allocator lock and keeps it: a process that exits after this
/// leaves the lock owned by a dead context.
pub fn hold_allocator_lock(h: &mut Handle) -> Result<()> {
    h.ctx.lock(H_ALLOC_LOCK)
}

/// The lock offsets this handle's context records as held (should be none
/// between operations).
pub fn held_locks(h: &Handle) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for i in 0..crate::segment::layout::HELD_CAP {
        let v = h
            .ctx
            .region()
            .load64(h.ctx.off + crate::segment::layout::C_HELD + 8 * i)?;
        if v != 0 {
            out.push(v);
        }
    }
    Ok(out)
}

/// Makes the process abort (no destructors, as under SIGKILL) at the `n`-th
/// crash point this handle passes from now on: each logged write (before and
/// after it), commit, lock, unlock and seqlock bump.
pub fn crash_after(h: &mut Handle, n: u64) {
    h.ctx.crash_after.set(Some(n));
}
