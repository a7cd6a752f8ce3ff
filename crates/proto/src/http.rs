//! HTTP/1.1 requests: heads, bodies and commands in the URI.
