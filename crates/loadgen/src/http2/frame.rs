//! HTTP/2 frames on the wire (RFC 9113, section 4 and 6): the 9-byte frame header, the frame types
//! and flags the client meets, and the few frames it writes. No I/O and no connection state:
//! `conn` decides what the frames mean.

/// The connection preface a client sends first (RFC 9113, 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADER_LEN: usize = 9;
/// The largest frame payload a peer may send before SETTINGS_MAX_FRAME_SIZE says otherwise; the
/// client never raises it, so it is the largest frame it accepts.
pub const DEFAULT_MAX_FRAME: usize = 16_384;
/// Every window's size before SETTINGS_INITIAL_WINDOW_SIZE and WINDOW_UPDATE change it.
pub const DEFAULT_WINDOW: u32 = 65_535;
/// The largest window (and stream id): 2^31 - 1.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
pub const MAX_STREAM_ID: u32 = (1 << 31) - 1;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const FLAG_END_STREAM: u8 = 0x1;
pub const FLAG_ACK: u8 = 0x1;
pub const FLAG_END_HEADERS: u8 = 0x4;
pub const FLAG_PADDED: u8 = 0x8;
pub const FLAG_PRIORITY: u8 = 0x20;

pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;

/// Error codes (RFC 9113, 7).
pub const NO_ERROR: u32 = 0x0;

/// The name of an error code, for messages.
pub fn error_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => "an unknown error code",
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Header {
    /// The header at the start of `b` (at least HEADER_LEN bytes).
    pub fn parse(b: &[u8]) -> Header {
        Header {
            len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            // The reserved bit is ignored on receipt (RFC 9113, 4.1).
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_STREAM_ID,
        }
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Append a frame header to `out`.
pub fn put_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len < 1 << 24);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// A SETTINGS frame with these (identifier, value) pairs.
pub fn put_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    put_header(out, 6 * settings.len(), SETTINGS, 0, 0);
    for (id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn put_settings_ack(out: &mut Vec<u8>) {
    put_header(out, 0, SETTINGS, FLAG_ACK, 0);
}

pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    debug_assert!(increment > 0 && increment <= MAX_WINDOW);
    put_header(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

pub fn put_ping_ack(out: &mut Vec<u8>, payload: &[u8]) {
    put_header(out, 8, PING, FLAG_ACK, 0);
    out.extend_from_slice(payload);
}

/// The payload of a padded frame without its padding: `None` when the padding does not fit.
pub fn unpadded(h: &Header, payload: &[u8]) -> Option<(usize, usize)> {
    if !h.has(FLAG_PADDED) {
        return Some((0, payload.len()));
    }
    let pad = usize::from(*payload.first()?);
    (pad < payload.len()).then(|| (1, payload.len() - pad))
}

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_written_is_the_header_read() {
        let mut out = Vec::new();
        put_header(&mut out, 0x01_02_03, HEADERS, FLAG_END_HEADERS, 7);
        assert_eq!(
            Header::parse(&out),
            Header {
                len: 0x01_02_03,
                kind: HEADERS,
                flags: FLAG_END_HEADERS,
                stream: 7
            }
        );
        // The reserved bit of the stream id is ignored.
        out[5] |= 0x80;
        assert_eq!(Header::parse(&out).stream, 7);
    }

    #[test]
    fn padding_is_cut_off_and_padding_longer_than_the_frame_is_refused() {
        let h = Header {
            len: 5,
            kind: DATA,
            flags: FLAG_PADDED,
            stream: 1,
        };
        assert_eq!(unpadded(&h, &[2, b'h', b'i', 0, 0]), Some((1, 3)));
        assert_eq!(unpadded(&h, &[5, b'h', b'i', 0, 0]), None);
        assert_eq!(unpadded(&h, &[]), None);
    }
}
