//! memcached's binary protocol: 24-byte request and response headers.
