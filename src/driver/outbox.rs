//! A client's bounded outgoing byte queue.
//!
//! The loop never blocks on a client: bytes wait here until the socket is writable. The
//! queue has a soft limit — a caller asks [`Outbox::has_room`] before adding optional data
//! (output replay) and stops when it is full, so memory per client stays within the limit
//! plus one frame. Replies to requests are always accepted (a client cannot make the daemon
//! answer more than it asks, and requests are read only while the queue has room).

use std::io::{self, Write};

/// Pending bytes for one client.
#[derive(Debug)]
pub struct Outbox {
    buf: Vec<u8>,
    /// Bytes of `buf` already written.
    sent: usize,
    limit: usize,
}

impl Outbox {
    /// An empty queue whose soft limit is `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Outbox {
            buf: Vec::new(),
            sent: 0,
            limit,
        }
    }

    /// Bytes waiting to be written.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.sent
    }

    /// Whether optional data may still be queued.
    pub fn has_room(&self) -> bool {
        self.pending() < self.limit
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending() == 0
    }

    /// Queues bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Writes as much as `sink` accepts without blocking. Returns `Ok(())` on WouldBlock or
    /// when empty; any other error means the client is gone.
    pub fn flush_to<W: Write>(&mut self, sink: &mut W) -> io::Result<()> {
        while self.sent < self.buf.len() {
            match sink.write(&self.buf[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        self.compact();
        Ok(())
    }

    /// Drops written bytes; gives memory back after a burst.
    fn compact(&mut self) {
        if self.sent == self.buf.len() {
            self.buf.clear();
            self.sent = 0;
            if self.buf.capacity() > self.limit.max(64 * 1024) {
                self.buf.shrink_to(64 * 1024);
            }
        } else if self.sent > self.buf.len() / 2 {
            self.buf.drain(..self.sent);
            self.sent = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that accepts `n` bytes per call and then says WouldBlock once.
    struct Trickle {
        got: Vec<u8>,
        per_call: usize,
        block_after: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls > self.block_after {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(self.per_call);
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn partial_writes_keep_order_and_free_memory() {
        let mut ob = Outbox::new(16);
        ob.push(b"hello ");
        ob.push(b"world");
        let mut sink = Trickle {
            got: vec![],
            per_call: 4,
            block_after: 2,
            calls: 0,
        };
        ob.flush_to(&mut sink).unwrap();
        assert_eq!(sink.got, b"hello wo");
        assert_eq!(ob.pending(), 3);
        sink.block_after = usize::MAX;
        ob.flush_to(&mut sink).unwrap();
        assert_eq!(sink.got, b"hello world");
        assert!(ob.is_empty());
    }

    #[test]
    fn room_is_a_soft_limit() {
        let mut ob = Outbox::new(4);
        assert!(ob.has_room());
        ob.push(b"123456");
        assert!(!ob.has_room());
    }
}
