//! The paths a run requests and what each answer must be: `--urls FILE` read once, every URL's
//! request prebuilt, and the order the next one is picked in. One definition for both load models:
//! the open loop (`openloop`) and the closed loop (`exchange`, driven by the epoll and io_uring
//! engines) take the same list, the same picks for a seed and the same per-URL expectation, so a
//! wrong file is the same `verification_mismatch` whichever loop fetched it.

use crate::http::{self, Expectation, RequestSpec};
use crate::rng::Rng;
use crate::target::{self, HttpUrl};

/// `--urls` files longer than this are refused (each URL's request is prebuilt in memory).
pub const MAX_URLS: usize = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlOrder {
    Random,
    RoundRobin,
}

impl UrlOrder {
    pub fn name(self) -> &'static str {
        match self {
            UrlOrder::Random => "random",
            UrlOrder::RoundRobin => "round-robin",
        }
    }
}

/// Per-URL request bytes, built once; `what[i]` is for messages. Without `--urls`, one entry: the
/// positional URL.
pub struct Requests {
    pub wire: Vec<Vec<u8>>,
    pub what: Vec<String>,
    /// Each URL's path (and query), as requested.
    pub paths: Vec<String>,
    /// What URL i's response must match: the run's expectation, with the size or digest its `--urls` line
    /// gave (a list of files of different sizes is still verified response by response).
    pub expect: Vec<Expectation>,
    pub order: UrlOrder,
}

impl Requests {
    /// The positional URL alone (no `--urls`): one request, judged by the run's expectation.
    pub fn one(
        request: Vec<u8>,
        what: String,
        path: String,
        expect: Expectation,
        order: UrlOrder,
    ) -> Self {
        Requests {
            wire: vec![request],
            what: vec![what],
            paths: vec![path],
            expect: vec![expect],
            order,
        }
    }

    /// `--urls FILE`: every line's request, built like `spec` with the line's path, and its
    /// expectation: the run's, with the body size or digest the line gives. Sizes or digests both
    /// per line and for every URL (`--expect-body-size`/`--expect-body-sha256`) are refused: one of
    /// the two would be silently ignored.
    pub fn from_file(
        path: &std::path::Path,
        base: &HttpUrl,
        spec: &RequestSpec,
        expect: &Expectation,
        order: UrlOrder,
    ) -> Result<Self, String> {
        let lines = read_urls(path, base)?;
        let per_url_body = lines
            .iter()
            .any(|l| l.body_size.is_some() || l.body_sha256.is_some());
        if per_url_body && (expect.body_size.is_some() || expect.body_sha256.is_some()) {
            return Err(format!("--urls {} gives sizes or digests per URL, and --expect-body-size/--expect-body-sha256 one for every URL: keep one of the two", path.display()));
        }
        let mut wire = Vec::with_capacity(lines.len());
        let mut expects = Vec::with_capacity(lines.len());
        let mut what = Vec::with_capacity(lines.len());
        for line in &lines {
            wire.push(http::build_request(&RequestSpec {
                path: &line.path,
                ..*spec
            })?);
            expects.push(Expectation {
                body_size: line.body_size.or(expect.body_size),
                body_sha256: line.body_sha256.or(expect.body_sha256),
                ..expect.clone()
            });
            what.push(format!("{} {}", spec.method, line.path));
        }
        Ok(Requests {
            wire,
            what,
            paths: lines.iter().map(|l| l.path.clone()).collect(),
            expect: expects,
            order,
        })
    }

    /// The longest request of the list, in bytes.
    pub fn longest(&self) -> usize {
        self.wire.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// Does any URL's check need the body's sha256 (computed only then)?
    pub fn wants_digest(&self) -> bool {
        self.expect.iter().any(Expectation::wants_digest)
    }
}

/// Picks the next request index: round-robin from a per-thread offset, or seeded random.
pub struct UrlPicker {
    n: usize,
    order: UrlOrder,
    next: usize,
    rng: Rng,
}

impl UrlPicker {
    pub fn new(n: usize, order: UrlOrder, seed: u64, thread_index: usize) -> Self {
        UrlPicker {
            n,
            order,
            next: thread_index % n.max(1),
            rng: Rng::for_thread(seed, thread_index, 2),
        }
    }

    #[inline]
    pub fn pick(&mut self) -> usize {
        if self.n == 1 {
            return 0;
        }
        match self.order {
            UrlOrder::RoundRobin => {
                let i = self.next;
                self.next = (i + 1) % self.n;
                i
            }
            UrlOrder::Random => self.rng.below(self.n),
        }
    }
}

/// One line of a `--urls` file: the path, and what its response's body must be when the line says.
struct UrlLine {
    path: String,
    body_size: Option<u64>,
    body_sha256: Option<[u8; 32]>,
}

/// `--urls FILE`: one path (`/x`) or absolute URL per line, blank lines and `#` comments skipped.
/// After the URL, separated by spaces, a line may give the body's size in bytes (`12345`) and/or its digest
/// (`sha256=<64 hex digits>`): a file list with a manifest of sizes, so a wrong file is an error.
/// Every absolute URL must name the same host and port as the main URL: one run, one target.
fn read_urls(path: &std::path::Path, base: &HttpUrl) -> Result<Vec<UrlLine>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--urls {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let where_ = || format!("--urls {} line {}", path.display(), n + 1);
        let mut fields = line.split_ascii_whitespace();
        let line = fields
            .next()
            .expect("a trimmed, non-empty line has a first field");
        let (mut body_size, mut body_sha256) = (None, None);
        for field in fields {
            if let Some(hex) = field.strip_prefix("sha256=") {
                if body_sha256.is_some() {
                    return Err(format!("{}: two sha256= digests", where_()));
                }
                body_sha256 =
                    Some(http::parse_sha256_hex(hex).map_err(|e| format!("{}: {e}", where_()))?);
            } else if let Ok(size) = field.parse::<u64>() {
                if body_size.is_some() {
                    return Err(format!("{}: two body sizes", where_()));
                }
                body_size = Some(size);
            } else {
                return Err(format!(
                    "{}: '{field}' after the URL is neither a body size in bytes nor sha256=<64 hex digits> (percent-encode spaces inside a path)",
                    where_()
                ));
            }
        }
        let p = if line.starts_with('/') {
            if line.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(format!(
                    "{}: '{line}' contains spaces or control characters; percent-encode them",
                    where_()
                ));
            }
            line.to_string()
        } else {
            let u = target::parse_http_url(line).map_err(|e| format!("{}: {e}", where_()))?;
            if u.host != base.host || u.port != base.port || u.tls != base.tls {
                return Err(format!(
                    "{}: '{line}' is on {}:{}{}, but the run's target is {}:{}{}; every URL must be on the same host and port, over the same scheme (split the list into one run per target)",
                    where_(), u.host, u.port, if u.tls { " (https)" } else { "" },
                    base.host, base.port, if base.tls { " (https)" } else { "" }
                ));
            }
            u.path
        };
        out.push(UrlLine {
            path: p,
            body_size,
            body_sha256,
        });
        if out.len() > MAX_URLS {
            return Err(format!(
                "--urls {}: more than {MAX_URLS} URLs",
                path.display()
            ));
        }
    }
    if out.is_empty() {
        return Err(format!(
            "--urls {}: no URLs in the file (one path or http:// URL per line)",
            path.display()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_picks_repeat_with_the_seed_and_cover_every_url() {
        let picks = |seed, order| {
            let mut p = UrlPicker::new(10, order, seed, 0);
            (0..1000).map(|_| p.pick()).collect::<Vec<_>>()
        };
        let a = picks(5, UrlOrder::Random);
        assert_eq!(a, picks(5, UrlOrder::Random));
        assert_ne!(a, picks(6, UrlOrder::Random));
        assert!((0..10).all(|u| a.contains(&u)));
        let rr = picks(5, UrlOrder::RoundRobin);
        assert_eq!(&rr[..12], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
        let mut other_thread = UrlPicker::new(10, UrlOrder::RoundRobin, 5, 3);
        assert_eq!(other_thread.pick(), 3);
    }
}
