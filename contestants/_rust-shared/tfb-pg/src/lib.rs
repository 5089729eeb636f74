//! TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries) on PostgreSQL for
//! the Rust contestants (rust-axum, rust-hyper, rust-actix): what they answer, without the framework; each contestant
//! routes the requests and writes these answers with its own response types (docs/techempower.md).
//!
//! tokio-postgres through a deadpool-postgres pool of `--pg-pool` connections per process. A request takes
//! one connection from the pool and makes its queries on it one after the other, each awaited before the
//! next: tokio-postgres would pipeline queries of one connection awaited concurrently, and these contestants
//! declare no pipelining. Statements are prepared once per connection (prepare_cached).

use std::collections::BTreeMap;

use askama::Template;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use rand::RngExt;
use serde::Serialize;
use tokio_postgres::NoTls;

/// The World table's ids are 1..=WORLD_ROWS.
pub const WORLD_ROWS: i32 = 10_000;
/// TechEmpower's upper bound on `queries` / `count`.
pub const MAX_QUERIES: usize = 500;

const SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";
/// One batched UPDATE for all of a request's rows (TechEmpower allows it).
const UPDATE_WORLDS: &str =
    "UPDATE world SET randomnumber = v.n FROM unnest($1::int[], $2::int[]) AS v(id, n) WHERE world.id = v.id";

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// A World row as TechEmpower's JSON has it: exactly the keys `id` and `randomNumber`, integers.
#[derive(Clone, Copy, Serialize)]
pub struct World {
    pub id: i32,
    #[serde(rename = "randomNumber")]
    pub random_number: i32,
}

struct Fortune {
    id: i32,
    message: String,
}

/// The fortunes page; askama escapes each message (an .html template escapes every expression).
#[derive(Template)]
#[template(path = "fortunes.html")]
struct FortunesPage<'a> {
    fortunes: &'a [Fortune],
}

/// The process's pool and its copy of World for /cached-queries.
pub struct Db {
    pool: Pool,
    /// Indexed by id (index 0 unused), read once at start: the server starts after the fixture is loaded.
    cache: Vec<World>,
}

fn random_id() -> i32 {
    rand::rng().random_range(1..=WORLD_ROWS)
}

/// TechEmpower's `queries` / `count` parameter from a request's query string: absent, empty, not an integer
/// or below 1 is 1; above 500 is 500.
pub fn count_param(query: Option<&str>, name: &str) -> usize {
    let value = query
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .and_then(|(_, value)| value.parse::<i64>().ok())
        .unwrap_or(1);
    value.clamp(1, MAX_QUERIES as i64) as usize
}

impl Db {
    /// The pool of `pool_size` connections to `url` (netarena's `{postgresql_url}`), and the World cache read
    /// through it. A database that cannot be reached fails the start with its message.
    pub async fn connect(url: &str, pool_size: usize) -> Result<Db, String> {
        let config: tokio_postgres::Config = url.parse().map_err(|err| format!("--pg-url {url:?}: {err}"))?;
        let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .build()
            .map_err(|err| format!("--pg-url {url:?}: {err}"))?;
        let cache = read_world_table(&pool).await.map_err(|err| format!("--pg-url {url:?}: reading world: {err}"))?;
        Ok(Db { pool, cache })
    }

    /// /db (n = 1) and /queries: n random rows, each read by its own SELECT.
    pub async fn worlds(&self, n: usize) -> Result<Vec<World>, Error> {
        let client = self.pool.get().await?;
        read_worlds(&client, n).await
    }

    /// /updates: n rows read as for /queries, each given a new random number, written by one UPDATE. An id
    /// drawn twice keeps its last number, in the answer too.
    pub async fn update_worlds(&self, n: usize) -> Result<Vec<World>, Error> {
        let client = self.pool.get().await?;
        let mut rows = read_worlds(&client, n).await?;
        let mut last = BTreeMap::new();
        for row in &mut rows {
            row.random_number = random_id();
            last.insert(row.id, row.random_number);
        }
        for row in &mut rows {
            row.random_number = last[&row.id];
        }
        // A BTreeMap gives the ids in ascending order, so concurrent requests lock their rows in the same
        // order and cannot deadlock.
        let (ids, numbers): (Vec<i32>, Vec<i32>) = last.into_iter().unzip();
        let statement = client.prepare_cached(UPDATE_WORLDS).await?;
        client.execute(&statement, &[&ids, &numbers]).await?;
        Ok(rows)
    }

    /// /cached-queries: n random rows from the copy read at start (no query).
    pub fn cached_worlds(&self, n: usize) -> Vec<World> {
        (0..n).map(|_| self.cache[random_id() as usize]).collect()
    }

    /// /fortunes: the table's rows and one added at request time, sorted by message, as the HTML page.
    pub async fn fortunes_page(&self) -> Result<String, Error> {
        let client = self.pool.get().await?;
        let statement = client.prepare_cached(SELECT_FORTUNES).await?;
        let mut fortunes: Vec<Fortune> = client
            .query(&statement, &[])
            .await?
            .iter()
            .map(|row| Fortune { id: row.get(0), message: row.get(1) })
            .collect();
        fortunes.push(Fortune { id: 0, message: "Additional fortune added at request time.".to_string() });
        fortunes.sort_by(|a, b| a.message.cmp(&b.message));
        Ok(FortunesPage { fortunes: &fortunes }.render()?)
    }
}

async fn read_worlds(client: &deadpool_postgres::Client, n: usize) -> Result<Vec<World>, Error> {
    let statement = client.prepare_cached(SELECT_WORLD).await?;
    let mut rows = Vec::with_capacity(n);
    // One query at a time (no pipelining), each row its own SELECT (TechEmpower forbids one IN (...) query).
    for _ in 0..n {
        let row = client.query_one(&statement, &[&random_id()]).await?;
        rows.push(World { id: row.get(0), random_number: row.get(1) });
    }
    Ok(rows)
}

async fn read_world_table(pool: &Pool) -> Result<Vec<World>, Error> {
    let client = pool.get().await?;
    let mut cache = vec![World { id: 0, random_number: 0 }; WORLD_ROWS as usize + 1];
    for row in client.query("SELECT id, randomnumber FROM world", &[]).await? {
        let id: i32 = row.get(0);
        if !(1..=WORLD_ROWS).contains(&id) {
            return Err(format!("world has id {id} outside 1..{WORLD_ROWS}").into());
        }
        cache[id as usize] = World { id, random_number: row.get(1) };
    }
    Ok(cache)
}
