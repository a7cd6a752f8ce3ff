//! memcached's UDP frame header: 8 bytes before each datagram's payload.
