//! A request's header block (RFC 7541), encoded once per URL and sent unchanged on every stream:
//! each field is an index into the static table or a literal "without indexing", so the block never
//! touches the dynamic table and needs no per-connection encoder state. Responses are decoded by
//! the `loona-hpack` crate (`conn`), which keeps the dynamic table the server's encoder fills.

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

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(block: &[u8]) -> Vec<(String, String)> {
        let mut d = loona_hpack::Decoder::new();
        let mut out = Vec::new();
        d.decode_with_cb(block, |n, v| {
            out.push((
                String::from_utf8(n.into_owned()).unwrap(),
                String::from_utf8(v.into_owned()).unwrap(),
            ))
        })
        .expect("a block HPACK decodes");
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
}
