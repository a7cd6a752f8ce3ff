//! WebSocket (RFC 6455): the opening handshake and frames.
