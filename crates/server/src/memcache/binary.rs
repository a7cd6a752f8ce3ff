//! memcached binary-protocol connections.
