//! HPACK (RFC 7541) for the client: a request's header block, encoded once per URL and sent unchanged
//! on every stream (each field an index into the static table or a literal "without indexing", so the
//! block never touches the dynamic table and needs no per-connection encoder state); and the
//! decoding of response header blocks (`ResponseDecoder`), with the dynamic table the server's encoder
//! fills, Huffman-coded strings decoded by the `httlib-huffman` crate's tables.
//!
//! Why the decoder is this crate's own: `loona-hpack` (like `hpack` and `fluke-hpack`, its ancestors)
//! builds a hash map of the Huffman code for every Huffman-coded string it decodes, which made each
//! response against nginx cost about 100 µs of CPU, ten times h2load's whole request; `httlib-hpack`
//! allocates two vectors per field and shifts its input buffer after each. This one allocates only
//! for the entries it adds to the dynamic table.

use std::collections::VecDeque;

use crate::http::RequestSpec;

/// Headers HTTP/2 forbids (RFC 9113, 8.2.2) or replaces (`Host` becomes `:authority`): given on
/// the command line, they are left out of the HTTP/2 request.
const NOT_IN_HTTP2: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// Static-table indices (RFC 7541, Appendix A) used by requests.
const AUTHORITY: usize = 1;
const METHOD_GET: usize = 2;
const METHOD_POST: usize = 3;
const PATH: usize = 4;
const PATH_ROOT: usize = 4;
const SCHEME_HTTP: usize = 6;
const SCHEME_HTTPS: usize = 7;
const CONTENT_LENGTH: usize = 28;

/// An integer with an `prefix_bits`-bit prefix, the first byte's other bits being `first` (RFC 7541, 5.1).
fn put_int(out: &mut Vec<u8>, first: u8, prefix_bits: u32, value: usize) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A string literal without Huffman coding (RFC 7541, 5.2).
fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// A field indexed whole in the static table.
fn indexed(out: &mut Vec<u8>, index: usize) {
    put_int(out, 0x80, 7, index);
}

/// A literal field "without indexing" whose name is static-table entry `name` (0: a literal name).
fn literal(out: &mut Vec<u8>, name: usize, literal_name: &[u8], value: &[u8]) {
    put_int(out, 0x00, 4, name);
    if name == 0 {
        put_str(out, literal_name);
    }
    put_str(out, value);
}

/// The header block of one request: the pseudo-headers first, then the command line's headers in
/// their order (names lowercased, the ones HTTP/2 has no place for left out), then content-length
/// when the request has a body and the command line gave none.
pub fn request_block(spec: &RequestSpec, tls: bool, path: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + path.len());
    match spec.method {
        "GET" => indexed(&mut out, METHOD_GET),
        "POST" => indexed(&mut out, METHOD_POST),
        other => literal(&mut out, METHOD_GET, b"", other.as_bytes()),
    }
    indexed(&mut out, if tls { SCHEME_HTTPS } else { SCHEME_HTTP });
    if path == "/" {
        indexed(&mut out, PATH_ROOT);
    } else {
        literal(&mut out, PATH, b"", path.as_bytes());
    }
    let host = spec
        .headers
        .iter()
        .filter_map(|h| h.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("host"))
        .map_or(spec.host_header, |(_, v)| v.trim());
    literal(&mut out, AUTHORITY, b"", host.as_bytes());
    let mut has_length = false;
    for h in spec.headers {
        // build_request checked every header's shape already (it runs first for every request).
        let Some((name, value)) = h.split_once(':') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        if NOT_IN_HTTP2.contains(&name.as_str()) {
            continue;
        }
        has_length |= name == "content-length";
        literal(&mut out, 0, name.as_bytes(), value.trim().as_bytes());
    }
    let method_has_body = matches!(spec.method, "POST" | "PUT" | "PATCH");
    if !has_length && (!spec.body.is_empty() || method_has_body) {
        literal(
            &mut out,
            CONTENT_LENGTH,
            b"",
            spec.body.len().to_string().as_bytes(),
        );
    }
    out
}

/// The static table (RFC 7541, Appendix A): index 1 is the first entry.
const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// What an entry of the dynamic table counts besides its name and value (RFC 7541, 4.1).
const ENTRY_OVERHEAD: usize = 32;
/// An integer longer than this many continuation bytes is refused (2^28 and more: no header needs it).
const MAX_INT_BYTES: usize = 4;

/// Decodes the header blocks of one connection's responses, in the order they arrive (the dynamic
/// table is the connection's, so every block must be decoded, even one of a stream no longer awaited).
pub struct ResponseDecoder {
    /// Newest first: dynamic index 62 is `table[0]`.
    table: DynamicTable,
    size: usize,
    max_size: usize,
    /// The most the server may set `max_size` to: the SETTINGS_HEADER_TABLE_SIZE the client allows.
    allowed: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

type DynamicTable = VecDeque<(Box<[u8]>, Box<[u8]>)>;

/// The field at `index` of the static table (1..=61) or the dynamic one `table` (62 on).
fn field(table: &DynamicTable, index: usize) -> Result<(&[u8], &[u8]), String> {
    match index {
        0 => Err("index 0 in a header block".into()),
        1..=61 => Ok(STATIC_TABLE[index - 1]),
        _ => table
            .get(index - 62)
            .map(|(n, v)| (&n[..], &v[..]))
            .ok_or_else(|| format!("index {index} beyond the dynamic table")),
    }
}

/// The integer with an `bits`-bit prefix at `b[*pos]` (RFC 7541, 5.1), `pos` moved past it.
fn integer(b: &[u8], pos: &mut usize, bits: u32) -> Result<usize, String> {
    let max = (1usize << bits) - 1;
    let first = usize::from(
        *b.get(*pos)
            .ok_or("a header block cut short in an integer")?,
    ) & max;
    *pos += 1;
    if first < max {
        return Ok(first);
    }
    let mut value = max;
    for k in 0..=MAX_INT_BYTES {
        let byte = *b
            .get(*pos)
            .ok_or("a header block cut short in an integer")?;
        *pos += 1;
        value += usize::from(byte & 0x7f) << (7 * k);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("an integer too large for a header block".into())
}

/// The string literal at `b[*pos]` (RFC 7541, 5.2) into `out`, Huffman-decoded if it is coded so.
fn string(b: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Result<(), String> {
    let huffman = *b
        .get(*pos)
        .ok_or("a header block cut short before a string")?
        & 0x80
        != 0;
    let len = integer(b, pos, 7)?;
    let end = pos
        .checked_add(len)
        .filter(|&e| e <= b.len())
        .ok_or("a string longer than its header block")?;
    out.clear();
    if huffman {
        httlib_huffman::decode(&b[*pos..end], out, httlib_huffman::DecoderSpeed::FourBits)
            .map_err(|e| format!("a Huffman-coded string that does not decode ({e:?})"))?;
    } else {
        out.extend_from_slice(&b[*pos..end]);
    }
    *pos = end;
    Ok(())
}

impl ResponseDecoder {
    /// A decoder whose dynamic table may grow to `allowed` bytes (the client's
    /// SETTINGS_HEADER_TABLE_SIZE), starting at that size as RFC 7541 says.
    pub fn new(allowed: usize) -> Self {
        ResponseDecoder {
            table: VecDeque::new(),
            size: 0,
            max_size: allowed,
            allowed,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    fn evict_to(&mut self, room: usize) {
        while self.size > room {
            let (n, v) = self
                .table
                .pop_back()
                .expect("a table of some size has an entry");
            self.size -= n.len() + v.len() + ENTRY_OVERHEAD;
        }
    }

    /// Add the field in `name` and `value` (RFC 7541, 4.4: older entries evicted to make room, the
    /// whole table emptied by an entry larger than it).
    fn insert(&mut self) {
        let size = self.name.len() + self.value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max_size - size);
        self.size += size;
        self.table
            .push_front((self.name.as_slice().into(), self.value.as_slice().into()));
    }

    /// Decode one header block, handing each field to `on_field` in order. An error is a
    /// COMPRESSION_ERROR: the connection's table can no longer be trusted.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut on_field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), String> {
        let mut pos = 0;
        while pos < block.len() {
            let first = block[pos];
            if first & 0x80 != 0 {
                let index = integer(block, &mut pos, 7)?;
                let (name, value) = field(&self.table, index)?;
                on_field(name, value);
            } else if first & 0x20 != 0 && first & 0x40 == 0 {
                let size = integer(block, &mut pos, 5)?;
                if size > self.allowed {
                    return Err(format!(
                        "a dynamic table size update to {size}, above the {} allowed",
                        self.allowed
                    ));
                }
                self.max_size = size;
                self.evict_to(size);
            } else {
                let indexing = first & 0x40 != 0;
                let index = integer(block, &mut pos, if indexing { 6 } else { 4 })?;
                if index == 0 {
                    string(block, &mut pos, &mut self.name)?;
                } else {
                    let name = field(&self.table, index)?.0;
                    self.name.clear();
                    self.name.extend_from_slice(name);
                }
                string(block, &mut pos, &mut self.value)?;
                on_field(&self.name, &self.value);
                if indexing {
                    self.insert();
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a block decodes to, by `loona-hpack` (the oracle), checked against this decoder.
    fn decoded(block: &[u8]) -> Vec<(String, String)> {
        let oracle = by_oracle(&mut loona_hpack::Decoder::new(), block);
        assert_eq!(ours(&mut ResponseDecoder::new(4096), block), oracle);
        oracle
            .into_iter()
            .map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
            .collect()
    }

    fn by_oracle(d: &mut loona_hpack::Decoder, block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        d.decode_with_cb(block, |n, v| out.push((n.into_owned(), v.into_owned())))
            .expect("the oracle decodes the block");
        out
    }

    fn ours(d: &mut ResponseDecoder, block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        d.decode(block, |n, v| out.push((n.to_vec(), v.to_vec())))
            .expect("the block decodes");
        out
    }

    fn spec<'a>(method: &'a str, headers: &'a [String], body: &'a [u8]) -> RequestSpec<'a> {
        RequestSpec {
            method,
            host_header: "127.0.0.1:8080",
            path: "/ignored",
            headers,
            body,
            close: false,
        }
    }

    #[test]
    fn a_get_decodes_to_its_pseudo_headers_and_headers_and_nothing_forbidden() {
        let headers = vec![
            "Accept: text/plain".to_string(),
            "Connection: keep-alive".to_string(),
        ];
        let block = request_block(&spec("GET", &headers, b""), false, "/hello?x=1");
        assert_eq!(
            decoded(&block),
            [
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/hello?x=1"),
                (":authority", "127.0.0.1:8080"),
                ("accept", "text/plain"),
            ]
            .map(|(n, v)| (n.to_string(), v.to_string()))
        );
    }

    #[test]
    fn host_becomes_the_authority_and_a_body_gets_its_length() {
        let headers = vec!["Host: example.test".to_string()];
        let body = vec![b'x'; 300];
        let block = request_block(&spec("PUT", &headers, &body), true, "/");
        assert_eq!(
            decoded(&block),
            [
                (":method", "PUT"),
                (":scheme", "https"),
                (":path", "/"),
                (":authority", "example.test"),
                ("content-length", "300"),
            ]
            .map(|(n, v)| (n.to_string(), v.to_string()))
        );
    }

    #[test]
    fn long_values_use_the_integer_continuation_bytes() {
        let path = format!("/{}", "p".repeat(5000));
        let block = request_block(&spec("GET", &[], b""), false, &path);
        assert_eq!(decoded(&block)[2], (":path".to_string(), path));
    }

    #[test]
    fn every_static_entry_is_the_oracles() {
        for index in 1..=61u8 {
            decoded(&[0x80 | index]);
        }
    }

    #[test]
    fn a_connections_blocks_decode_as_the_oracle_decodes_them_table_and_huffman_included() {
        // Blocks an encoder with a dynamic table makes (loona-hpack's, which indexes every field),
        // decoded one after another on one connection by both decoders: names and values grow past
        // the 4096-byte table so that entries are evicted.
        let mut encoder = loona_hpack::Encoder::new();
        let (mut oracle, mut mine) = (loona_hpack::Decoder::new(), ResponseDecoder::new(4096));
        for i in 0..300usize {
            let date = format!("Sun, 29 Nov 2026 05:{:02}:{:02} GMT", i / 60, i % 60);
            let long = "v".repeat(i * 7 % 900);
            let status = if i % 3 == 0 { "200" } else { "201" };
            let fields: Vec<(&[u8], &[u8])> = vec![
                (b":status", status.as_bytes()),
                (b"server", b"nginx/1.22.1"),
                (b"date", date.as_bytes()),
                (b"x-long", long.as_bytes()),
            ];
            let block = encoder.encode(fields.iter().copied());
            assert_eq!(
                ours(&mut mine, &block),
                by_oracle(&mut oracle, &block),
                "block {i}"
            );
        }
        // A Huffman-coded value (RFC 7541, C.4.1: "www.example.com" as :authority).
        let c41 = [
            0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab,
            0x90, 0xf4, 0xff,
        ];
        assert_eq!(
            decoded(&c41)[3],
            (":authority".into(), "www.example.com".into())
        );
    }

    #[test]
    fn broken_blocks_are_errors_not_panics() {
        let mut d = ResponseDecoder::new(4096);
        for (block, says) in [
            (&[0x80][..], "index 0"),
            (&[0xbe][..], "beyond the dynamic table"),
            (&[0x3f, 0xe2, 0x1f][..], "size update"),
            (&[0x40, 0x05, b'a'][..], "longer than its header block"),
            (&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f][..], "too large"),
            (&[0x40, 0x81, 0xff, 0x00][..], "Huffman"),
        ] {
            let err = d.decode(block, |_, _| {}).unwrap_err();
            assert!(err.contains(says), "{block:?}: {err}");
        }
    }
}
