//! What every response must match, and the verdict on one response.

use super::Response;

/// What every response must match.
#[derive(Clone, Debug, Default)]
pub struct Expectation {
    /// None: any 2xx or 3xx.
    pub status: Option<u16>,
    pub body_size: Option<u64>,
    pub body_sha256: Option<[u8; 32]>,
}

pub enum Verdict {
    Ok,
    Status,
    Mismatch(String),
}

impl Expectation {
    pub fn wants_digest(&self) -> bool {
        self.body_sha256.is_some()
    }

    pub fn judge(&self, r: &Response) -> Verdict {
        let status_ok = match self.status {
            Some(s) => r.status == s,
            None => (200..400).contains(&r.status),
        };
        if !status_ok {
            return Verdict::Status;
        }
        if let Some(n) = self.body_size {
            if r.body_len != n {
                return Verdict::Mismatch(format!("body of {} bytes, expected {n}", r.body_len));
            }
        }
        if let Some(d) = self.body_sha256 {
            if r.body_sha256 != Some(d) {
                return Verdict::Mismatch(format!(
                    "body sha256 differs from the expected {}",
                    hex(&d)
                ));
            }
        }
        Verdict::Ok
    }

    pub fn describe_status(&self) -> String {
        match self.status {
            Some(s) => format!("{s}"),
            None => "2xx/3xx".into(),
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn parse_sha256_hex(text: &str) -> Result<[u8; 32], String> {
    let t = text.trim();
    if t.len() != 64 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "invalid sha256 '{text}': give 64 hexadecimal digits"
        ));
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).expect("checked hex");
    }
    Ok(out)
}
