//! memcached over UDP.
