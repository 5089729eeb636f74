//! netarena contestant: tokio + hyper 1.x, every catalog scenario.
//!
//! `server --mode http [--host A] --port P --workers W --static-dir D [--mongo-url U]` serves the HTTP
//! scenarios (/mongo/{name} only with a non-empty `--mongo-url`, and only in a binary built with the `mongo`
//! cargo feature: one without it refuses a non-empty `--mongo-url` with exit code 2; TechEmpower's database
//! routes /db, /queries, /fortunes, /updates, /cached-queries likewise with `--pg-url U --pg-pool N` and the
//! `postgresql` feature);
//! `server --mode echo [--host A] --port P --workers W` is the raw TCP echo server.
//! `--workers` is the number of tokio worker threads (one multi-threaded runtime).
//! HTTP mode serves the protocol netarena starts it for, NETARENA_PROTOCOL: h1, h1-tls, h2 or h2c (TLS with
//! the PEM files NETARENA_TLS_CERT and NETARENA_TLS_KEY), through the crate shared with rust-axum,
//! contestants/_rust-shared/tls.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
#[cfg(feature = "postgresql")]
use hyper::header::SERVER;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
#[cfg(feature = "mongo")]
use mongodb::bson::{doc, RawDocumentBuf};
#[cfg(feature = "mongo")]
use mongodb::Collection;
use netarena_tls::{tls_acceptor, Protocol};
use serde::Serialize;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tower::ServiceExt;
use tower_http::services::ServeDir;

/// Matches the catalog's "backlog of at least 1024"; the kernel caps it at somaxconn.
const LISTEN_BACKLOG: u32 = 4096;
/// Refuse absurd /bytes/{n} so one request cannot make the server allocate gigabytes.
const MAX_BYTES_LEN: usize = 64 * 1024 * 1024;
const MAX_SLEEP_MS: u64 = 600_000;
/// The catalog's /bytes/{n} sizes: their bodies are built once at start.
const BYTES_SIZES: [usize; 3] = [40, 10_000, 524_288];

/// Every response body: in-memory bodies and ServeDir's streamed file bodies share one type.
type Body = UnsyncBoxBody<Bytes, std::io::Error>;

struct Options {
    mode: String,
    host: std::net::IpAddr,
    port: u16,
    workers: usize,
    static_dir: Option<PathBuf>,
    /// Empty (netarena's `{mongo_url}` outside mongo measurements) or absent: no /mongo route.
    mongo_url: String,
    /// Empty (netarena's `{postgresql_url}` outside the postgresql scenarios) or absent: no database routes.
    pg_url: String,
    /// The PostgreSQL pool's size (netarena's `{db_pool}`); read only by a binary with the driver.
    #[cfg_attr(not(feature = "postgresql"), allow(dead_code))]
    pg_pool: usize,
}

fn usage() -> &'static str {
    "usage: server --mode http|echo [--host ADDR] --port PORT [--workers N] [--static-dir DIR] [--mongo-url URL] \
     [--pg-url URL] [--pg-pool N]"
}

fn parse_args() -> Result<Options, String> {
    let mut mode = None;
    let mut host = std::net::IpAddr::from([127, 0, 0, 1]);
    let mut port = None;
    let mut workers = 1usize;
    let mut static_dir = None;
    let mut mongo_url = String::new();
    let mut pg_url = String::new();
    let mut pg_pool = 1usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value; {}", usage()))?;
        match flag.as_str() {
            "--mode" => mode = Some(value),
            "--host" => {
                host = value.parse().map_err(|_| {
                    format!("--host must be an IP address (0.0.0.0: every address), got {value:?}")
                })?
            }
            "--port" => {
                port =
                    Some(value.parse::<u16>().map_err(|_| {
                        format!("--port must be an integer 1..65535, got {value:?}")
                    })?)
            }
            "--workers" => {
                workers = value
                    .parse::<usize>()
                    .ok()
                    .filter(|w| *w >= 1)
                    .ok_or_else(|| format!("--workers must be an integer >= 1, got {value:?}"))?
            }
            "--static-dir" => static_dir = Some(PathBuf::from(value)),
            "--mongo-url" => mongo_url = value,
            "--pg-url" => pg_url = value,
            "--pg-pool" => {
                pg_pool = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        format!("--pg-pool must be an integer >= 1 (connections), got {value:?}")
                    })?
            }
            other => return Err(format!("unknown option {other:?}; {}", usage())),
        }
    }
    let mode = mode.ok_or_else(|| format!("--mode is required; {}", usage()))?;
    if mode != "http" && mode != "echo" {
        return Err(format!("--mode must be http or echo, got {mode:?}"));
    }
    let port = port.ok_or_else(|| format!("--port is required; {}", usage()))?;
    Ok(Options {
        mode,
        host,
        port,
        workers,
        static_dir,
        mongo_url,
        pg_url,
        pg_pool,
    })
}

fn listen(host: std::net::IpAddr, port: u16) -> std::io::Result<TcpListener> {
    let addr = SocketAddr::new(host, port);
    let socket = if host.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // A restarted contestant must be able to rebind while old connections sit in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

struct App {
    static_files: Option<ServeDir>,
    /// Bodies for the catalog's /bytes/{n}, built once at start and never changed, so requests share them
    /// without a lock (Bytes clones are refcounts). Any other n is built for its request.
    bytes_bodies: HashMap<usize, Bytes>,
    /// The fixture collection (`docs` in the URL's database) on the process's one mongodb Client, whose
    /// connection pool every request shares; None without --mongo-url.
    #[cfg(feature = "mongo")]
    mongo_docs: Option<Collection<RawDocumentBuf>>,
    /// TechEmpower's database scenarios' pool and World cache; None without --pg-url.
    #[cfg(feature = "postgresql")]
    pg: Option<netarena_tfb_pg::Db>,
}

impl App {
    fn bytes_body(&self, n: usize) -> Bytes {
        match self.bytes_bodies.get(&n) {
            Some(body) => body.clone(),
            None => Bytes::from(vec![b'*'; n]),
        }
    }
}

fn response(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    let mut resp = Response::new(
        Full::new(body)
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn not_found() -> Response<Body> {
    response(
        StatusCode::NOT_FOUND,
        "text/plain",
        Bytes::from_static(b"not found"),
    )
}

async fn handle(app: Arc<App>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Ok(response(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            Bytes::from_static(b"method not allowed"),
        ));
    }
    let path = req.uri().path();
    if path == "/hello" {
        return Ok(response(
            StatusCode::OK,
            "text/plain",
            Bytes::from_static(b"Hello, World!"),
        ));
    }
    if path == "/json" {
        let body = serde_json::to_vec(&Message {
            message: "Hello, World!",
        })
        .expect("serializable");
        return Ok(response(
            StatusCode::OK,
            "application/json",
            Bytes::from(body),
        ));
    }
    if let Some(n) = path.strip_prefix("/bytes/") {
        return Ok(match n.parse::<usize>() {
            Ok(n) if n <= MAX_BYTES_LEN => response(
                StatusCode::OK,
                "application/octet-stream",
                app.bytes_body(n),
            ),
            _ => not_found(),
        });
    }
    if let Some(ms) = path.strip_prefix("/sleep/") {
        return Ok(match ms.parse::<u64>() {
            Ok(ms) if ms <= MAX_SLEEP_MS => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                response(
                    StatusCode::OK,
                    "text/plain",
                    Bytes::from(format!("slept {ms}")),
                )
            }
            _ => not_found(),
        });
    }
    #[cfg(feature = "mongo")]
    if let Some(name) = path.strip_prefix("/mongo/") {
        return Ok(match app.mongo_docs.as_ref() {
            Some(docs) => find_doc(docs, name).await,
            None => not_found(),
        });
    }
    #[cfg(feature = "postgresql")]
    if let Some(db) = app.pg.as_ref() {
        if let Some(resp) = techempower(db, path, req.uri().query()).await {
            return Ok(resp);
        }
    }
    if let (Some(rel), Some(files)) = (path.strip_prefix("/static/"), app.static_files.as_ref()) {
        // ServeDir maps the request path below its root (refusing `..`); hand it the part after /static.
        let Ok(uri) = format!("/{rel}").parse::<hyper::Uri>() else {
            return Ok(not_found());
        };
        let (mut parts, body) = req.into_parts();
        parts.uri = uri;
        let Ok(resp) = files
            .clone()
            .oneshot(Request::from_parts(parts, body))
            .await;
        return Ok(resp.map(|body| body.boxed_unsync()));
    }
    Ok(not_found())
}

/// TechEmpower's database scenarios: the answers come from the crate shared with rust-axum and rust-actix
/// (contestants/_rust-shared/tfb-pg), written here as hyper responses; None for any other path.
#[cfg(feature = "postgresql")]
async fn techempower(
    db: &netarena_tfb_pg::Db,
    path: &str,
    query: Option<&str>,
) -> Option<Response<Body>> {
    use netarena_tfb_pg::count_param;

    fn json<T: Serialize>(value: &T) -> (&'static str, Bytes) {
        (
            "application/json",
            Bytes::from(serde_json::to_vec(value).expect("serializable")),
        )
    }
    let answer = match path {
        "/db" => db.worlds(1).await.map(|rows| json(&rows[0])),
        "/queries" => db
            .worlds(count_param(query, "queries"))
            .await
            .map(|rows| json(&rows)),
        "/updates" => db
            .update_worlds(count_param(query, "queries"))
            .await
            .map(|rows| json(&rows)),
        "/cached-queries" => Ok(json(&db.cached_worlds(count_param(query, "count")))),
        "/fortunes" => db
            .fortunes_page()
            .await
            .map(|page| ("text/html; charset=utf-8", Bytes::from(page))),
        _ => return None,
    };
    let mut resp = match answer {
        Ok((content_type, body)) => response(StatusCode::OK, content_type, body),
        Err(err) => response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            Bytes::from(format!("database error: {err}")),
        ),
    };
    // TechEmpower requires a Server header on these answers (hyper adds Date).
    resp.headers_mut()
        .insert(SERVER, HeaderValue::from_static("rust-hyper"));
    Some(resp)
}

#[cfg(feature = "mongo")]
/// GET /mongo/{name}: one find_one by _id. The document stays the raw BSON the server sent
/// (RawDocumentBuf, no intermediate tree) and is written by serde_json through the bson crate's serde
/// implementation: field order kept, int32/int64 as JSON integers, doubles as JSON floats (`1.0` stays a
/// float), strings, booleans, nested documents and arrays as themselves.
async fn find_doc(docs: &Collection<RawDocumentBuf>, name: &str) -> Response<Body> {
    let text_error = |msg: String| {
        response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            Bytes::from(msg),
        )
    };
    match docs.find_one(doc! { "_id": name }).await {
        Ok(Some(found)) => match serde_json::to_vec(&found) {
            Ok(body) => response(StatusCode::OK, "application/json", Bytes::from(body)),
            Err(err) => text_error(format!("cannot write the document as JSON: {err}")),
        },
        Ok(None) => not_found(),
        Err(err) => text_error(err.to_string()),
    }
}

#[cfg(feature = "mongo")]
/// Most connections in the process's mongodb pool (see mongo_collection).
const MONGO_POOL_SIZE: u32 = 100;

/// The process's one mongodb Client and the `docs` collection of the database the URL names. Its pool
/// may hold 100 connections, the default of the other official drivers measured beside it (PyMongo, Node,
/// Go, Java); the Rust driver's own default of 10 would make rust-hyper the only contestant queueing for a
/// connection at 200 clients. A maxPoolSize in the URL still wins. The driver connects in the background;
/// a database that is down shows as 500s on /mongo, not as a failed start.
#[cfg(feature = "mongo")]
async fn mongo_collection(url: &str) -> Result<Collection<RawDocumentBuf>, String> {
    let mut options = mongodb::options::ClientOptions::parse(url)
        .await
        .map_err(|err| format!("--mongo-url {url:?}: {err}"))?;
    options.max_pool_size.get_or_insert(MONGO_POOL_SIZE);
    let client = mongodb::Client::with_options(options)
        .map_err(|err| format!("--mongo-url {url:?}: {err}"))?;
    let db = client.default_database().ok_or_else(|| {
        format!("--mongo-url {url:?} names no database (mongodb://host:port/DATABASE)")
    })?;
    Ok(db.collection::<RawDocumentBuf>("docs"))
}

/// The chunk size of the echo scenario (netarena-load's `--chunk` default): one read and one write per chunk.
const ECHO_BUFFER: usize = 32 * 1024;

async fn echo_connection(mut stream: TcpStream) {
    let (reader, mut writer) = stream.split();
    // tokio::io::copy's own buffer is 8 KiB, four reads and four writes per 32 KiB chunk: the echo measured
    // tokio's default buffer rather than tokio (27k chunks/s here against Go's 86k). Go's io.Copy uses 32 KiB.
    let mut reader = tokio::io::BufReader::with_capacity(ECHO_BUFFER, reader);
    let _ = tokio::io::copy_buf(&mut reader, &mut writer).await;
}

async fn serve_echo(listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(echo_connection(stream));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(opts) => opts,
        Err(msg) => {
            eprintln!("rust-hyper: {msg}");
            return ExitCode::from(2);
        }
    };
    // What netarena starts the server for (NETARENA_PROTOCOL), and over TLS the certificate and key it serves:
    // both read before anything listens, so a bad setting is one message and exit code 2.
    let (protocol, tls) = match Protocol::from_env().and_then(|p| Ok((p, tls_acceptor(p)?))) {
        Ok(found) => found,
        Err(msg) => {
            eprintln!("rust-hyper: {msg}");
            return ExitCode::from(2);
        }
    };
    // A binary built without the driver says so at start, not with a 404 per request that would look like a
    // missing fixture document.
    if cfg!(not(feature = "mongo")) && !opts.mongo_url.is_empty() {
        eprintln!(
            "rust-hyper: --mongo-url given, but this binary was built without the `mongo` cargo feature (the \
             MongoDB driver); build it with `cargo build --release --features mongo` (netarena does when a run \
             measures mongo)"
        );
        return ExitCode::from(2);
    }
    if cfg!(not(feature = "postgresql")) && !opts.pg_url.is_empty() {
        eprintln!(
            "rust-hyper: --pg-url given, but this binary was built without the `postgresql` cargo feature (the \
             PostgreSQL driver); build it with `cargo build --release --features postgresql` (netarena does when \
             a run measures db, queries, fortunes, updates or cached-queries)"
        );
        return ExitCode::from(2);
    }
    if opts.mode == "http" {
        if let Some(dir) = &opts.static_dir {
            if !dir.is_dir() {
                eprintln!(
                    "rust-hyper: --static-dir {} is not a directory; pass the folder holding the static file set",
                    dir.display()
                );
                return ExitCode::from(2);
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.workers)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async move {
        let listener = match listen(opts.host, opts.port) {
            Ok(l) => l,
            Err(err) => {
                eprintln!(
                    "rust-hyper: cannot listen on {} port {}: {err}",
                    opts.host, opts.port
                );
                return ExitCode::from(1);
            }
        };
        // The one mongodb Client of the process, made before the first request can arrive.
        #[cfg(feature = "mongo")]
        let mongo_docs = if opts.mode == "http" && !opts.mongo_url.is_empty() {
            match mongo_collection(&opts.mongo_url).await {
                Ok(docs) => Some(docs),
                Err(msg) => {
                    eprintln!("rust-hyper: {msg}");
                    return ExitCode::from(2);
                }
            }
        } else {
            None
        };
        // The pool and the World cache, filled before the first request can arrive.
        #[cfg(feature = "postgresql")]
        let pg = if opts.mode == "http" && !opts.pg_url.is_empty() {
            match netarena_tfb_pg::Db::connect(&opts.pg_url, opts.pg_pool).await {
                Ok(db) => Some(db),
                Err(msg) => {
                    eprintln!("rust-hyper: {msg}");
                    return ExitCode::from(2);
                }
            }
        } else {
            None
        };
        let server = async {
            if opts.mode == "echo" {
                serve_echo(listener).await
            } else {
                let app = Arc::new(App {
                    static_files: opts.static_dir.as_ref().map(ServeDir::new),
                    bytes_bodies: BYTES_SIZES
                        .iter()
                        .map(|&n| (n, Bytes::from(vec![b'*'; n])))
                        .collect(),
                    #[cfg(feature = "mongo")]
                    mongo_docs,
                    #[cfg(feature = "postgresql")]
                    pg,
                });
                let service = service_fn(move |req| handle(app.clone(), req));
                netarena_tls::serve(listener, protocol, tls, service).await
            }
        };
        tokio::select! {
            _ = server => {}
            _ = shutdown_signal() => {}
        }
        ExitCode::SUCCESS
    })
}
