//! netarena contestant: Actix Web 4 on its own HttpServer, the catalog's HTTP scenarios.
//!
//! `server [--host A] --port P --workers W [--static-dir D] [--mongo-url U]`; `--workers` is HttpServer's
//! worker count: that many threads, each running its own single-threaded runtime and its own copy of the App.
//! /mongo/{doc} is routed only with a non-empty `--mongo-url`, and only in a binary built with the `mongo`
//! cargo feature: one without it refuses a non-empty `--mongo-url` with exit code 2. TechEmpower's database
//! routes (/db, /queries, /fortunes, /updates, /cached-queries) likewise: only with a non-empty `--pg-url`
//! (and `--pg-pool N`), only in a binary built with the `postgresql` feature.
//! `NETARENA_PROTOCOL` says what to serve (docs/protocols.md): `h1`, or `h1-tls`, HTTP/1.1 over TLS through Actix's
//! own rustls acceptor with the PEM files `NETARENA_TLS_CERT` and `NETARENA_TLS_KEY` (the configuration of the crate
//! shared with rust-axum and rust-hyper, contestants/_rust-shared/tls). HTTP/2 only in a binary built with the
//! `http2` cargo feature, which serves `h2` (the same acceptor, h2 chosen by ALPN) and `h2c` (prior knowledge
//! beside HTTP/1.1 on one port) and refuses h1-tls, since its TLS listeners offer h2 first by ALPN; a binary
//! without it refuses h2 and h2c. Either refuses with exit code 2.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use actix_files::Files;
use actix_web::web::{self, Bytes};
use actix_web::{App, HttpResponse, HttpServer};
#[cfg(feature = "mongo")]
use mongodb::bson::{doc, RawDocumentBuf};
#[cfg(feature = "mongo")]
use mongodb::Collection;
use netarena_tls::{server_config, Protocol, ServerConfig};
use serde::Serialize;

const NAME: &str = "rust-actix";
/// Above the catalog's minimum of 1024 (Actix's default is exactly 1024); the kernel caps it at somaxconn.
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
        let value = args.next().ok_or_else(|| format!("{flag} needs a value; {}", usage()))?;
        match flag.as_str() {
            "--host" => {
                host = value
                    .parse()
                    .map_err(|_| format!("--host must be an IP address (0.0.0.0: every address), got {value:?}"))?
            }
            "--port" => {
                port = Some(value.parse::<u16>().map_err(|_| format!("--port must be an integer 1..65535, got {value:?}"))?)
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
                    .ok_or_else(|| format!("--pg-pool must be an integer >= 1 (connections), got {value:?}"))?
            }
            other => return Err(format!("unknown option {other:?}; {}", usage())),
        }
    }
    let port = port.ok_or_else(|| format!("--port is required; {}", usage()))?;
    Ok(Options { host, port, workers, static_dir, mongo_url, pg_url, pg_pool })
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// Bodies for the catalog's /bytes/{n}, built once at start and shared by every worker (web::Data is an Arc;
/// Bytes clones are refcounts), never changed, so requests read them without a lock. Any other n is built
/// for its request.
type BytesBodies = HashMap<usize, Bytes>;

/// A &'static str answers as text/plain; charset=utf-8.
async fn hello() -> &'static str {
    "Hello, World!"
}

async fn json() -> web::Json<Message> {
    web::Json(Message { message: "Hello, World!" })
}

async fn bytes(bodies: web::Data<BytesBodies>, n: web::Path<usize>) -> HttpResponse {
    let n = n.into_inner();
    if n > MAX_BYTES_LEN {
        return HttpResponse::NotFound().finish();
    }
    let body = bodies.get(&n).cloned().unwrap_or_else(|| Bytes::from(vec![b'*'; n]));
    HttpResponse::Ok().content_type("application/octet-stream").body(body)
}

/// actix_web::rt::time::sleep is tokio's timer on the worker's runtime: the worker serves others meanwhile.
async fn sleep(ms: web::Path<u64>) -> HttpResponse {
    let ms = ms.into_inner();
    if ms > MAX_SLEEP_MS {
        return HttpResponse::NotFound().finish();
    }
    actix_web::rt::time::sleep(Duration::from_millis(ms)).await;
    HttpResponse::Ok().content_type("text/plain").body(format!("slept {ms}"))
}

/// GET /mongo/{doc}: one find_one by _id. The document stays the raw BSON the server sent (RawDocumentBuf, no
/// intermediate tree) and is written by HttpResponse::json through the bson crate's serde implementation:
/// field order kept, int32/int64 as JSON integers, doubles as JSON floats, strings, booleans, nested
/// documents and arrays as themselves. An unknown _id is a 404, a database error a 500 with its message.
#[cfg(feature = "mongo")]
async fn find_doc(docs: web::Data<Collection<RawDocumentBuf>>, name: web::Path<String>) -> HttpResponse {
    match docs.find_one(doc! { "_id": name.into_inner() }).await {
        Ok(Some(found)) => HttpResponse::Ok().json(found),
        Ok(None) => HttpResponse::NotFound().finish(),
        Err(err) => HttpResponse::InternalServerError().content_type("text/plain").body(err.to_string()),
    }
}

/// Most connections in the process's mongodb pool (see mongo_collection).
#[cfg(feature = "mongo")]
const MONGO_POOL_SIZE: u32 = 100;

/// The process's one mongodb Client and the `docs` collection of the database the URL names, made on the main
/// thread's runtime and shared by every worker, as Actix's own MongoDB example does. Its pool may hold 100
/// connections, the default of the other official drivers measured beside it (PyMongo, Node, Go, Java); the
/// Rust driver's own default of 10 would make this the only contestant queueing for a connection at 200
/// clients. A maxPoolSize in the URL still wins. The driver connects in the background; a database that is
/// down shows as 500s on /mongo, not as a failed start.
#[cfg(feature = "mongo")]
async fn mongo_collection(url: &str) -> Result<Collection<RawDocumentBuf>, String> {
    let mut options = mongodb::options::ClientOptions::parse(url)
        .await
        .map_err(|err| format!("--mongo-url {url:?}: {err}"))?;
    options.max_pool_size.get_or_insert(MONGO_POOL_SIZE);
    let client = mongodb::Client::with_options(options).map_err(|err| format!("--mongo-url {url:?}: {err}"))?;
    let db = client
        .default_database()
        .ok_or_else(|| format!("--mongo-url {url:?} names no database (mongodb://host:port/DATABASE)"))?;
    Ok(db.collection::<RawDocumentBuf>("docs"))
}

/// TechEmpower's database scenarios: the answers come from the crate shared with rust-axum and rust-hyper
/// (contestants/_rust-shared/tfb-pg), written here as Actix responses.
#[cfg(feature = "postgresql")]
mod techempower {
    use actix_web::http::header::{ContentType, SERVER};
    use actix_web::{web, HttpRequest, HttpResponse};
    use netarena_tfb_pg::{count_param, Db, Error};

    use super::NAME;

    /// TechEmpower requires a Server header on these answers (actix-http adds Date).
    fn answer_rows<T: serde::Serialize>(rows: Result<T, Error>) -> HttpResponse {
        match rows {
            Ok(rows) => HttpResponse::Ok().insert_header((SERVER, NAME)).json(rows),
            Err(err) => database_error(err),
        }
    }

    fn database_error(err: Error) -> HttpResponse {
        HttpResponse::InternalServerError()
            .insert_header((SERVER, NAME))
            .body(format!("database error: {err}"))
    }

    async fn single_query(db: web::Data<Db>) -> HttpResponse {
        answer_rows(db.worlds(1).await.map(|rows| rows[0]))
    }

    async fn queries(db: web::Data<Db>, req: HttpRequest) -> HttpResponse {
        answer_rows(db.worlds(count_param(Some(req.query_string()), "queries")).await)
    }

    async fn updates(db: web::Data<Db>, req: HttpRequest) -> HttpResponse {
        answer_rows(db.update_worlds(count_param(Some(req.query_string()), "queries")).await)
    }

    async fn cached_queries(db: web::Data<Db>, req: HttpRequest) -> HttpResponse {
        answer_rows(Ok(db.cached_worlds(count_param(Some(req.query_string()), "count"))))
    }

    async fn fortunes(db: web::Data<Db>) -> HttpResponse {
        match db.fortunes_page().await {
            Ok(page) => HttpResponse::Ok()
                .insert_header((SERVER, NAME))
                .content_type(ContentType::html())
                .body(page),
            Err(err) => database_error(err),
        }
    }

    pub fn routes(config: &mut web::ServiceConfig) {
        config
            .route("/db", web::get().to(single_query))
            .route("/queries", web::get().to(queries))
            .route("/updates", web::get().to(updates))
            .route("/cached-queries", web::get().to(cached_queries))
            .route("/fortunes", web::get().to(fortunes));
    }
}

/// How the server listens for the protocol it was started for.
enum Listener {
    /// HTTP/1.1 in cleartext.
    Cleartext,
    /// Actix's rustls acceptor: HTTP/1.1, or in the `http2` build h2 when the client chooses it by ALPN.
    Tls(ServerConfig),
    /// HTTP/2 with prior knowledge beside HTTP/1.1 on one port, told apart by the connection's first bytes.
    #[cfg(feature = "http2")]
    AutoH2c,
}

fn tls_listener(protocol: Protocol) -> Result<Listener, String> {
    // Read now: a missing or unreadable PEM file is an error at start.
    let config = server_config(protocol)?.ok_or_else(|| format!("{} is not a TLS protocol", protocol.name()))?;
    Ok(Listener::Tls(config))
}

/// The listener for `protocol`, or why this binary does not serve it. Built without `http2` it serves h1 and
/// h1-tls; with it, h2 and h2c (and h1, cleartext offering no ALPN): actix-http's rustls acceptor then puts
/// "h2", "http/1.1" before the configuration's own ALPN list, so a start for h1-tls would choose h2 for a client
/// offering both, which h1-tls must not.
fn listener(protocol: Protocol) -> Result<Listener, String> {
    match protocol {
        Protocol::H1 => Ok(Listener::Cleartext),
        #[cfg(not(feature = "http2"))]
        Protocol::H1Tls => tls_listener(protocol),
        #[cfg(not(feature = "http2"))]
        Protocol::H2 | Protocol::H2c => Err(format!(
            "NETARENA_PROTOCOL={}: this binary was built without the `http2` cargo feature (Actix's HTTP/2); the \
             one built with `cargo build --release --features http2` serves h2 and h2c (netarena builds it when a \
             run measures one of them)",
            protocol.name()
        )),
        #[cfg(feature = "http2")]
        Protocol::H1Tls => Err(format!(
            "NETARENA_PROTOCOL={}: this binary was built with the `http2` cargo feature, whose TLS listeners offer \
             h2 first by ALPN; h1-tls is served by the one built without it",
            protocol.name()
        )),
        #[cfg(feature = "http2")]
        Protocol::H2 => tls_listener(protocol),
        #[cfg(feature = "http2")]
        Protocol::H2c => Ok(Listener::AutoH2c),
    }
}

async fn run(opts: Options, listener: Listener) -> ExitCode {
    #[cfg(feature = "mongo")]
    let mongo_docs = if opts.mongo_url.is_empty() {
        None
    } else {
        match mongo_collection(&opts.mongo_url).await {
            Ok(docs) => Some(web::Data::new(docs)),
            Err(msg) => {
                eprintln!("{NAME}: {msg}");
                return ExitCode::from(2);
            }
        }
    };
    // The pool and the World cache, made on the main thread before the workers start and shared by them
    // through web::Data (as the mongodb Client is).
    #[cfg(feature = "postgresql")]
    let pg = if opts.pg_url.is_empty() {
        None
    } else {
        match netarena_tfb_pg::Db::connect(&opts.pg_url, opts.pg_pool).await {
            Ok(db) => Some(web::Data::new(db)),
            Err(msg) => {
                eprintln!("{NAME}: {msg}");
                return ExitCode::from(2);
            }
        }
    };
    let bodies: web::Data<BytesBodies> =
        web::Data::new(BYTES_SIZES.iter().map(|&n| (n, Bytes::from(vec![b'*'; n]))).collect());
    let static_dir = opts.static_dir.clone();
    // The factory runs once per worker thread: each worker has its own App, sharing the Data made above.
    let server = HttpServer::new(move || {
        let mut app = App::new()
            .app_data(bodies.clone())
            .route("/hello", web::get().to(hello))
            .route("/json", web::get().to(json))
            .route("/bytes/{n}", web::get().to(bytes))
            .route("/sleep/{ms}", web::get().to(sleep));
        #[cfg(feature = "mongo")]
        if let Some(docs) = &mongo_docs {
            app = app.app_data(docs.clone()).route("/mongo/{doc}", web::get().to(find_doc));
        }
        #[cfg(feature = "postgresql")]
        if let Some(db) = &pg {
            app = app.app_data(db.clone()).configure(techempower::routes);
        }
        if let Some(dir) = &static_dir {
            // actix-files maps the path below /static onto the folder (refusing `..`).
            app = app.service(Files::new("/static", dir));
        }
        app
    })
    .workers(opts.workers)
    // Set before bind, which creates the socket with it.
    .backlog(LISTEN_BACKLOG)
    // Actix keeps the OS default (Nagle on) unless told: a response written in pieces (actix-files' chunks)
    // would wait for the client's delayed ACK.
    .tcp_nodelay(true);
    let addr = SocketAddr::new(opts.host, opts.port);
    let bound = match listener {
        Listener::Cleartext => server.bind(addr),
        Listener::Tls(config) => server.bind_rustls_0_23(addr, config),
        #[cfg(feature = "http2")]
        Listener::AutoH2c => server.bind_auto_h2c(addr),
    };
    let server = match bound {
        Ok(server) => server,
        Err(err) => {
            eprintln!("{NAME}: cannot listen on {} port {}: {err}", opts.host, opts.port);
            return ExitCode::from(1);
        }
    };
    // HttpServer handles the stop signals itself (SIGINT and SIGQUIT: immediate stop; SIGTERM: graceful).
    match server.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{NAME}: {err}");
            ExitCode::from(1)
        }
    }
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
    if let Some(dir) = &opts.static_dir {
        if !dir.is_dir() {
            eprintln!("{NAME}: --static-dir {} is not a directory; pass the folder holding the static file set", dir.display());
            return ExitCode::from(2);
        }
    }
    let listener = match Protocol::from_env().and_then(listener) {
        Ok(listener) => listener,
        Err(msg) => {
            eprintln!("{NAME}: {msg}");
            return ExitCode::from(2);
        }
    };
    // The runtime of the main thread, as #[actix_web::main] makes it: it runs the server's control and signal
    // handling (and the mongodb Client's background tasks); actix-server accepts on its own acceptor thread
    // and the workers serve the requests.
    actix_web::rt::System::new().block_on(run(opts, listener))
}
