//! The request bytes, built once from the command line.

/// The request line and headers as given on the command line, turned into wire bytes.
#[derive(Clone, Copy)]
pub struct RequestSpec<'a> {
    pub method: &'a str,
    pub host_header: &'a str,
    pub path: &'a str,
    pub headers: &'a [String],
    pub body: &'a [u8],
    pub close: bool,
}

/// One request's bytes. `Host` and `Content-Length` are added unless given.
pub fn build_request(spec: &RequestSpec) -> Result<Vec<u8>, String> {
    if spec.method.is_empty()
        || !spec
            .method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    {
        return Err(format!(
            "invalid --method '{}': it must be an HTTP token like GET or POST",
            spec.method
        ));
    }
    let mut out = format!("{} {} HTTP/1.1\r\n", spec.method, spec.path).into_bytes();
    let (mut has_host, mut has_length) = (false, false);
    for h in spec.headers {
        let Some((name, value)) = h.split_once(':') else {
            return Err(format!("invalid --header '{h}': use \"Name: value\""));
        };
        let name = name.trim();
        if name.is_empty()
            || !name.bytes().all(|b| b.is_ascii_graphic())
            || h.contains(['\r', '\n'])
        {
            return Err(format!("invalid --header '{h}': the name must be a token and neither part may contain CR or LF"));
        }
        has_host |= name.eq_ignore_ascii_case("host");
        has_length |= name.eq_ignore_ascii_case("content-length");
        out.extend_from_slice(format!("{name}: {}\r\n", value.trim()).as_bytes());
    }
    if !has_host {
        out.extend_from_slice(format!("Host: {}\r\n", spec.host_header).as_bytes());
    }
    let method_has_body = matches!(spec.method, "POST" | "PUT" | "PATCH");
    if !has_length && (!spec.body.is_empty() || method_has_body) {
        out.extend_from_slice(format!("Content-Length: {}\r\n", spec.body.len()).as_bytes());
    }
    if spec.close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(spec.body);
    Ok(out)
}
