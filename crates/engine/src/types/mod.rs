//! Commands by value type, one file each (STYLE 6): the type's helpers first,
//! its command table and handlers after.

pub(crate) mod bitops;
pub(crate) mod geo;
pub(crate) mod hash;
pub(crate) mod hyperloglog;
pub(crate) mod list;
pub(crate) mod set;
pub(crate) mod sort;
pub(crate) mod stream;
pub(crate) mod string;
pub(crate) mod zset;
