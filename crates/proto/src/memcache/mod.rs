//! memcached's protocols: the text protocol with its meta commands, the
//! binary protocol (24-byte headers) and the UDP frame header.

pub mod binary;
pub mod meta;
pub mod text;
pub mod udp;

#[doc(hidden)]
pub mod fuzzing;
