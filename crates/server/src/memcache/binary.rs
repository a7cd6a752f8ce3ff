//! memcached binary-protocol connections.

use std::rc::Rc;

use bytes::BytesMut;
use tokio::net::TcpStream;

use crate::worker::Worker;

/// Serves a binary-protocol connection whose first bytes are already in `buf`
/// (the text side saw the 0x80 magic byte and handed it over).
pub(crate) async fn serve(
    worker: &Rc<Worker>,
    stream: &mut TcpStream,
    buf: BytesMut,
) -> std::io::Result<()> {
    let _ = (worker, stream, buf);
    Ok(())
}
