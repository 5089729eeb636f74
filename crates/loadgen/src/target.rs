//! Target parsing, name resolution, and the loopback safety rule: a load generator must not flood
//! somebody else's machine by mistake, so anything that is not 127.0.0.0/8 or ::1 needs
//! `--allow-target HOST`.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    /// Path and query, starting with '/'.
    pub path: String,
    /// `Host` header value: host, plus `:port` unless it is the scheme's default (80, 443).
    pub host_header: String,
    /// `https://`: HTTP/1.1 over TLS.
    pub tls: bool,
}

pub fn parse_http_url(url: &str) -> Result<HttpUrl, String> {
    let (rest, tls, default_port) = if let Some(r) = url.strip_prefix("http://") {
        (r, false, 80)
    } else if let Some(r) = url.strip_prefix("https://") {
        (r, true, 443)
    } else {
        return Err(format!(
            "'{url}' is not an http:// or https:// URL (e.g. http://127.0.0.1:8080/hello)"
        ));
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    let path = path.split('#').next().unwrap_or("/").to_string();
    if authority.contains('@') {
        return Err(format!("'{url}': credentials in the URL are not supported; send an Authorization header with -H"));
    }
    let (host, port) =
        split_host_port(authority, Some(default_port)).map_err(|e| format!("'{url}': {e}"))?;
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "'{url}': the path contains spaces or control characters; percent-encode them"
        ));
    }
    let host_header = match (port, host.contains(':')) {
        (p, false) if p == default_port => host.clone(),
        (p, true) if p == default_port => format!("[{host}]"),
        (p, false) => format!("{host}:{p}"),
        (p, true) => format!("[{host}]:{p}"),
    };
    Ok(HttpUrl {
        host,
        port,
        path,
        host_header,
        tls,
    })
}

/// `host:port`, `[v6]:port`; with `default_port`, the port may be omitted.
pub fn split_host_port(text: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some((h, after)) = rest.split_once(']') else {
            return Err("unclosed '[' in the address".into());
        };
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => return Err(format!("unexpected '{after}' after the IPv6 address")),
        }
    } else {
        match text.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err("IPv6 addresses must be written in brackets, like [::1]:8080".into())
            }
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err("no host given".into());
    }
    let port = match (port, default_port) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("invalid port '{p}' (1-65535)"))?,
        (None, Some(d)) => d,
        (None, None) => {
            return Err(format!(
                "no port in '{text}': use HOST:PORT, e.g. 127.0.0.1:7000"
            ))
        }
    };
    Ok((host.to_string(), port))
}

pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Resolve and apply the safety rule. Returns every resolved address (the first is used).
pub fn resolve(host: &str, port: u16, allowed_hosts: &[String]) -> Result<Vec<SocketAddr>, String> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve target host '{host}': {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("target host '{host}' resolves to no address"));
    }
    let allowed = allowed_hosts.iter().any(|a| a.eq_ignore_ascii_case(host));
    if !allowed {
        if let Some(bad) = addrs.iter().find(|a| !is_loopback(a.ip())) {
            return Err(format!(
                "refusing target '{host}': it resolves to {}, which is not a loopback address (127.0.0.0/8, ::1). \
                 netarena-load only loads other machines when told so: add --allow-target {host}",
                bad.ip()
            ));
        }
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_http_url("http://127.0.0.1:8080/hello?x=1#frag").unwrap();
        assert_eq!(
            (
                u.host.as_str(),
                u.port,
                u.path.as_str(),
                u.host_header.as_str()
            ),
            ("127.0.0.1", 8080, "/hello?x=1", "127.0.0.1:8080")
        );
        let u = parse_http_url("http://localhost").unwrap();
        assert_eq!(
            (u.port, u.path.as_str(), u.host_header.as_str()),
            (80, "/", "localhost")
        );
        let u = parse_http_url("http://[::1]:9000?q").unwrap();
        assert_eq!(
            (u.host.as_str(), u.path.as_str(), u.host_header.as_str()),
            ("::1", "/?q", "[::1]:9000")
        );
        let u = parse_http_url("https://localhost/x").unwrap();
        assert!(u.tls);
        assert_eq!((u.port, u.host_header.as_str()), (443, "localhost"));
        let u = parse_http_url("https://[::1]:8443/").unwrap();
        assert_eq!((u.port, u.host_header.as_str()), (8443, "[::1]:8443"));
        assert!(!parse_http_url("http://localhost").unwrap().tls);
        assert!(parse_http_url("ftp://127.0.0.1/")
            .unwrap_err()
            .contains("not an http:// or https:// URL"));
        assert!(parse_http_url("127.0.0.1:80").is_err());
        assert!(parse_http_url("http://127.0.0.1:0/").is_err());
        assert!(parse_http_url("http://127.0.0.1:99999/").is_err());
        assert!(parse_http_url("http://:80/").is_err());
        assert!(parse_http_url("http://::1:80/")
            .unwrap_err()
            .contains("brackets"));
    }

    #[test]
    fn host_port() {
        assert_eq!(
            split_host_port("127.0.0.1:7000", None).unwrap(),
            ("127.0.0.1".into(), 7000)
        );
        assert_eq!(split_host_port("[::1]:7", None).unwrap(), ("::1".into(), 7));
        assert!(split_host_port("127.0.0.1", None)
            .unwrap_err()
            .contains("no port"));
    }

    #[test]
    fn loopback_rule() {
        assert!(is_loopback("127.0.0.1".parse().unwrap()));
        assert!(is_loopback("127.255.0.9".parse().unwrap()));
        assert!(is_loopback("::1".parse().unwrap()));
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("10.0.0.1".parse().unwrap()));
        assert!(!is_loopback("::ffff:8.8.8.8".parse().unwrap()));
        assert!(resolve("127.0.0.1", 80, &[]).is_ok());
        let e = resolve("10.1.2.3", 80, &[]).unwrap_err();
        assert!(e.contains("--allow-target 10.1.2.3"), "{e}");
        // Allowed by name: resolution only, nothing is sent.
        assert!(resolve("10.1.2.3", 80, &["10.1.2.3".into()]).is_ok());
    }
}
