//! The bytes io_uring sends for https and HTTP/2, which the exchange does not keep in place: TLS
//! records (rustls writes them from buffers of its own, which move) and HTTP/2 frames (the
//! connection's outbox grows and drains while a send might still read it). A send's SQE points at
//! its bytes until the kernel is done with them, so these are copied into the connection's
//! `SendStage`, which hands them to the kernel one send at a time (`take`), each asking for its
//! completion, and takes no byte more until that completion (`sent`).
//!
//! The code that fills the stage is the epoll engine's (`io::http::flush`, and the TLS read path of
//! `io::http`, with `io::tls`): to it the stage is a socket that is full while a send is in flight
//! (`WouldBlock`; what does not fit waits in the TLS session or the HTTP/2 outbox, as it waits there
//! for epoll's writable edge), and a receive completion's bytes are a socket that holds them and
//! then would block (`StagedIo`). Only how bytes reach the kernel differs between the engines.

use std::io::{self, Read, Write};

use crate::io::uring::closed::SendBuf;

/// One connection's bytes waiting for a send, and whether a send of them is in flight.
#[derive(Default)]
pub(crate) struct SendStage {
    buf: Vec<u8>,
    in_flight: bool,
}

impl SendStage {
    /// The staged bytes as the next send, if there are any and no send is in flight. They stay
    /// where they are, unchanged, until `sent`; the send asks for its completion (`SendBuf::more`).
    pub(crate) fn take(&mut self) -> Option<SendBuf> {
        if self.in_flight || self.buf.is_empty() {
            return None;
        }
        self.in_flight = true;
        Some(SendBuf::of(&self.buf, true))
    }

    /// Bytes are staged and may go now (`take` would hand them out).
    pub(crate) fn ready(&self) -> bool {
        !self.in_flight && !self.buf.is_empty()
    }

    /// The send `take` handed out completed: the stage is empty and takes bytes again.
    pub(crate) fn sent(&mut self) {
        self.buf.clear();
        self.in_flight = false;
    }

    /// A send is in flight: the kernel may still read the staged bytes.
    pub(crate) fn busy(&self) -> bool {
        self.in_flight
    }

    /// The connection's socket is gone. Both loops shut a socket down before they drop it, so a
    /// send still pending on it fails without reading another byte (the kernel checks the
    /// shutdown before it copies), and the buffer may be refilled for the next socket. Its memory
    /// is kept for that one.
    pub(crate) fn clear(&mut self) {
        self.sent();
    }
}

/// Staging: everything offered, unless a send is in flight (then nothing: the socket is "full").
impl Write for SendStage {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.in_flight {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What one receive completion brought.
#[derive(Clone, Copy)]
pub(crate) enum Arrived<'a> {
    Bytes(&'a [u8]),
    /// The peer closed the connection (a receive of 0 bytes).
    Eof,
}

/// A connection on io_uring as the shared TLS code sees its socket: reads give what one receive
/// brought and then would block (or give the peer's EOF); writes go to the connection's stage.
pub(crate) struct StagedIo<'a> {
    pub(crate) arrived: Arrived<'a>,
    pub(crate) stage: &'a mut SendStage,
}

impl Read for StagedIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.arrived {
            Arrived::Eof => Ok(0),
            Arrived::Bytes([]) => Err(io::ErrorKind::WouldBlock.into()),
            Arrived::Bytes(data) => data.read(buf),
        }
    }
}

impl Write for StagedIo<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.stage.write(data)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_takes_nothing_while_its_send_is_in_flight() {
        let mut stage = SendStage::default();
        assert!(stage.take().is_none(), "nothing staged, nothing to send");
        stage.write_all(b"hello ").unwrap();
        stage.write_all(b"world").unwrap();
        let send = stage.take().expect("staged bytes");
        assert_eq!((send.len, send.more), (11, true));
        // SAFETY: the stage keeps the bytes in place until `sent`.
        let bytes = unsafe { std::slice::from_raw_parts(send.ptr, send.len) };
        assert_eq!(bytes, b"hello world");
        assert!(stage.busy() && !stage.ready());
        let e = stage.write(b"more").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(stage.take().is_none(), "one send in flight at a time");
        stage.sent();
        assert!(!stage.busy() && !stage.ready());
        stage.write_all(b"more").unwrap();
        assert_eq!(stage.take().map(|s| s.len), Some(4));
    }

    #[test]
    fn a_receive_reads_like_a_socket_that_then_would_block_or_is_closed() {
        let mut stage = SendStage::default();
        let mut io = StagedIo {
            arrived: Arrived::Bytes(b"abcde"),
            stage: &mut stage,
        };
        let mut buf = [0u8; 3];
        assert_eq!(io.read(&mut buf).unwrap(), 3);
        assert_eq!(&buf, b"abc");
        assert_eq!(io.read(&mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"de");
        let e = io.read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        io.write_all(b"reply").unwrap();
        let mut closed = StagedIo {
            arrived: Arrived::Eof,
            stage: &mut stage,
        };
        assert_eq!(closed.read(&mut buf).unwrap(), 0);
        assert_eq!(stage.take().map(|s| s.len), Some(5));
    }
}
