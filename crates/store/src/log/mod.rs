//! The transaction log's shared-memory side (docs/persistence.md): the record
//! format, the frame around each record, and the ring every write appends
//! its record to before it publishes the new value.

mod apply;
pub mod frame;
pub mod record;
pub(crate) mod ring;

pub use apply::Applied;
pub use frame::{decode_frame_header, encode_frame, frame_size, FrameError, FRAME_HEADER};
pub use record::Record;
pub use ring::{FsyncPolicy, LogRing, LogStatus, UnknownPolicy, FIRST_LSN, GROUP_CONTINUES};
