//! netarena contestant: Axum 0.8 on a multi-threaded tokio runtime, the catalog's HTTP scenarios.
//!
//! `server [--host A] --port P --workers W [--static-dir D] [--mongo-url U] [--pg-url U --pg-pool N]`;
//! `--workers` is the number of tokio worker threads (one multi-threaded runtime). /mongo/{doc} is routed only
//! with a non-empty `--mongo-url`, and only in a binary built with the `mongo` cargo feature: one without it
//! refuses a non-empty `--mongo-url` with exit code 2. TechEmpower's database routes (/db, /queries,
//! /fortunes, /updates, /cached-queries) likewise: only with a non-empty `--pg-url`, only in a binary built
//! with the `postgresql` feature. It serves the protocol netarena starts it for, NETARENA_PROTOCOL: h1 and h2c
//! through axum::serve, h1-tls and h2 (TLS with the PEM files NETARENA_TLS_CERT and NETARENA_TLS_KEY) through
//! the crate shared with rust-hyper, contestants/_rust-shared/tls.

use std::collections::HashMap;
use std::future::IntoFuture;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
#[cfg(feature = "mongo")]
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::{Json, Router};
use bytes::Bytes;
use hyper_util::service::TowerToHyperService;
#[cfg(feature = "mongo")]
use mongodb::bson::{doc, RawDocumentBuf};
#[cfg(feature = "mongo")]
use mongodb::Collection;
use netarena_tls::{tls_acceptor, Protocol, TlsAcceptor};
use serde::Serialize;
use tokio::net::{TcpListener, TcpSocket};
use tower_http::services::ServeDir;

const NAME: &str = "rust-axum";
/// Above the catalog's minimum of 1024; the kernel caps it at somaxconn. Axum's own examples bind with
/// tokio's TcpListener::bind, whose backlog is fixed at 128 (mio's copy of the standard library's), so the
/// socket is made here with its backlog and handed to axum::serve.
const LISTEN_BACKLOG: u32 = 4096;
/// Refuse absurd /bytes/{n} so one request cannot make the server allocate gigabytes.
const MAX_BYTES_LEN: usize = 64 * 1024 * 1024;
const MAX_SLEEP_MS: u64 = 600_000;
/// The catalog's /bytes/{n} sizes: their bodies are built once at start.
const BYTES_SIZES: [usize; 3] = [40, 10_000, 524_288];

struct Options {
    host: IpAddr,
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
    "usage: server [--host ADDR] --port PORT [--workers N] [--static-dir DIR] [--mongo-url URL] [--pg-url URL] \
     [--pg-pool N]"
}

fn parse_args() -> Result<Options, String> {
    let mut host = IpAddr::from([127, 0, 0, 1]);
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
    let port = port.ok_or_else(|| format!("--port is required; {}", usage()))?;
    Ok(Options {
        host,
        port,
        workers,
        static_dir,
        mongo_url,
        pg_url,
        pg_pool,
    })
}

fn listen(host: IpAddr, port: u16) -> std::io::Result<TcpListener> {
    let socket = if host.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // A restarted contestant must be able to rebind while old connections sit in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::new(host, port))?;
    socket.listen(LISTEN_BACKLOG)
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// Bodies for the catalog's /bytes/{n}, built once at start and never changed, so requests share them
/// without a lock (Bytes clones are refcounts). Any other n is built for its request.
type BytesBodies = Arc<HashMap<usize, Bytes>>;

async fn hello() -> &'static str {
    "Hello, World!"
}

async fn json() -> Json<Message> {
    Json(Message {
        message: "Hello, World!",
    })
}

/// axum answers Bytes as application/octet-stream.
async fn bytes(
    State(bodies): State<BytesBodies>,
    Path(n): Path<usize>,
) -> Result<Bytes, StatusCode> {
    if n > MAX_BYTES_LEN {
        return Err(StatusCode::NOT_FOUND);
    }
    Ok(bodies
        .get(&n)
        .cloned()
        .unwrap_or_else(|| Bytes::from(vec![b'*'; n])))
}

async fn sleep(Path(ms): Path<u64>) -> Result<String, StatusCode> {
    if ms > MAX_SLEEP_MS {
        return Err(StatusCode::NOT_FOUND);
    }
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(format!("slept {ms}"))
}

/// GET /mongo/{doc}: one find_one by _id. The document stays the raw BSON the server sent (RawDocumentBuf, no
/// intermediate tree) and is written by axum::Json through the bson crate's serde implementation: field order
/// kept, int32/int64 as JSON integers, doubles as JSON floats, strings, booleans, nested documents and arrays as
/// themselves. An unknown _id is a 404, a database error a 500 with its message.
#[cfg(feature = "mongo")]
async fn find_doc(
    State(docs): State<Collection<RawDocumentBuf>>,
    Path(name): Path<String>,
) -> Response {
    match docs.find_one(doc! { "_id": name }).await {
        Ok(Some(found)) => Json(found).into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

/// Most connections in the process's mongodb pool (see mongo_collection).
#[cfg(feature = "mongo")]
const MONGO_POOL_SIZE: u32 = 100;

/// The process's one mongodb Client and the `docs` collection of the database the URL names. Its pool may hold
/// 100 connections, the default of the other official drivers measured beside it (PyMongo, Node, Go, Java);
/// the Rust driver's own default of 10 would make this the only contestant queueing for a connection at 200
/// clients. A maxPoolSize in the URL still wins. The driver connects in the background; a database that is
/// down shows as 500s on /mongo, not as a failed start.
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

/// TechEmpower's database scenarios: the answers come from the crate shared with rust-hyper and rust-actix
/// (contestants/_rust-shared/tfb-pg), written here as axum responses.
#[cfg(feature = "postgresql")]
mod techempower {
    use std::sync::Arc;

    use axum::extract::{RawQuery, State};
    use axum::http::{header, StatusCode};
    use axum::response::{Html, IntoResponse, Response};
    use axum::routing::get;
    use axum::{Json, Router};
    use netarena_tfb_pg::{count_param, Db, Error};

    use super::NAME;

    type SharedDb = State<Arc<Db>>;

    /// TechEmpower requires a Server header on these answers (hyper adds Date). Json answers
    /// application/json, Html text/html; charset=utf-8.
    fn answer(body: impl IntoResponse) -> Response {
        ([(header::SERVER, NAME)], body).into_response()
    }

    fn answer_rows<T: serde::Serialize>(rows: Result<T, Error>) -> Response {
        match rows {
            Ok(rows) => answer(Json(rows)),
            Err(err) => answer((
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("database error: {err}"),
            )),
        }
    }

    async fn single_query(State(db): SharedDb) -> Response {
        answer_rows(db.worlds(1).await.map(|rows| rows[0]))
    }

    async fn queries(State(db): SharedDb, RawQuery(query): RawQuery) -> Response {
        answer_rows(db.worlds(count_param(query.as_deref(), "queries")).await)
    }

    async fn updates(State(db): SharedDb, RawQuery(query): RawQuery) -> Response {
        answer_rows(
            db.update_worlds(count_param(query.as_deref(), "queries"))
                .await,
        )
    }

    async fn cached_queries(State(db): SharedDb, RawQuery(query): RawQuery) -> Response {
        answer(Json(
            db.cached_worlds(count_param(query.as_deref(), "count")),
        ))
    }

    async fn fortunes(State(db): SharedDb) -> Response {
        match db.fortunes_page().await {
            Ok(page) => answer(Html(page)),
            Err(err) => answer((
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("database error: {err}"),
            )),
        }
    }

    pub fn routes(db: Db) -> Router {
        Router::new()
            .route("/db", get(single_query))
            .route("/queries", get(queries))
            .route("/updates", get(updates))
            .route("/cached-queries", get(cached_queries))
            .route("/fortunes", get(fortunes))
            .with_state(Arc::new(db))
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

async fn run(opts: Options, protocol: Protocol, tls: Option<TlsAcceptor>) -> ExitCode {
    let listener = match listen(opts.host, opts.port) {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!(
                "{NAME}: cannot listen on {} port {}: {err}",
                opts.host, opts.port
            );
            return ExitCode::from(1);
        }
    };
    let bodies: BytesBodies = Arc::new(
        BYTES_SIZES
            .iter()
            .map(|&n| (n, Bytes::from(vec![b'*'; n])))
            .collect(),
    );
    let mut app = Router::new()
        .route("/hello", get(hello))
        .route("/json", get(json))
        .route("/bytes/{n}", get(bytes))
        .route("/sleep/{ms}", get(sleep))
        .with_state(bodies);
    // The one mongodb Client of the process, made before the first request can arrive.
    #[cfg(feature = "mongo")]
    if !opts.mongo_url.is_empty() {
        match mongo_collection(&opts.mongo_url).await {
            Ok(docs) => {
                app = app.merge(
                    Router::new()
                        .route("/mongo/{doc}", get(find_doc))
                        .with_state(docs),
                )
            }
            Err(msg) => {
                eprintln!("{NAME}: {msg}");
                return ExitCode::from(2);
            }
        }
    }
    // The pool and the World cache, filled before the first request can arrive.
    #[cfg(feature = "postgresql")]
    if !opts.pg_url.is_empty() {
        match netarena_tfb_pg::Db::connect(&opts.pg_url, opts.pg_pool).await {
            Ok(db) => app = app.merge(techempower::routes(db)),
            Err(msg) => {
                eprintln!("{NAME}: {msg}");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(dir) = &opts.static_dir {
        // ServeDir maps the path below /static onto the folder (refusing `..`).
        app = app.nest_service("/static", ServeDir::new(dir));
    }
    if let Some(tls) = tls {
        // h1-tls or h2: hyper's http1 or http2 connection over tokio-rustls, each request handed to the Router
        // (TCP_NODELAY set there too).
        let service = TowerToHyperService::new(app);
        tokio::select! {
            _ = netarena_tls::serve(listener, protocol, Some(tls), service) => {}
            _ = shutdown_signal() => {}
        }
        return ExitCode::SUCCESS;
    }
    // axum::serve leaves TCP_NODELAY to the listener; tap_io is its documented hook for it (0.8 has no
    // tcp_nodelay option on serve). Without it a response written in pieces (ServeDir's chunks) waits for the
    // client's delayed ACK.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    // Stop at once on the signal rather than axum's graceful shutdown, which would wait for every client to
    // close its connection.
    tokio::select! {
        result = axum::serve(listener, app).into_future() => {
            if let Err(err) = result {
                eprintln!("{NAME}: {err}");
                return ExitCode::from(1);
            }
        }
        _ = shutdown_signal() => {}
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(opts) => opts,
        Err(msg) => {
            eprintln!("{NAME}: {msg}");
            return ExitCode::from(2);
        }
    };
    // A binary built without the driver says so at start, not with a 404 per request that would look like a
    // missing fixture document.
    if cfg!(not(feature = "mongo")) && !opts.mongo_url.is_empty() {
        eprintln!(
            "{NAME}: --mongo-url given, but this binary was built without the `mongo` cargo feature (the MongoDB \
             driver); build it with `cargo build --release --features mongo` (netarena does when a run measures \
             mongo)"
        );
        return ExitCode::from(2);
    }
    if cfg!(not(feature = "postgresql")) && !opts.pg_url.is_empty() {
        eprintln!(
            "{NAME}: --pg-url given, but this binary was built without the `postgresql` cargo feature (the \
             PostgreSQL driver); build it with `cargo build --release --features postgresql` (netarena does when \
             a run measures db, queries, fortunes, updates or cached-queries)"
        );
        return ExitCode::from(2);
    }
    // What netarena starts the server for (NETARENA_PROTOCOL), and over TLS the certificate and key it serves:
    // both read before anything listens, so a bad setting is one message and exit code 2.
    let (protocol, tls) = match Protocol::from_env().and_then(|p| Ok((p, tls_acceptor(p)?))) {
        Ok(found) => found,
        Err(msg) => {
            eprintln!("{NAME}: {msg}");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = &opts.static_dir {
        if !dir.is_dir() {
            eprintln!("{NAME}: --static-dir {} is not a directory; pass the folder holding the static file set", dir.display());
            return ExitCode::from(2);
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.workers)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(opts, protocol, tls))
}
