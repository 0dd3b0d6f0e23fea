//! The two backends: opening a pool of either, its migrations and readiness, and
//! [`with_pool!`], which runs a query on whichever pool the store holds.

use super::Store;
use anyhow::{bail, Context, Result};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

static PG_MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");
static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

#[derive(Clone)]
pub(super) enum Pool {
    Pg(PgPool),
    Sqlite(SqlitePool),
}

/// Runs `$body` with `$p` bound to the pool of either backend; the body is compiled
/// once per backend, so every query is type-checked against both drivers.
macro_rules! with_pool {
    ($self:expr, $p:ident => $body:expr) => {
        match &$self.pool {
            $crate::store::pool::Pool::Pg($p) => $body,
            $crate::store::pool::Pool::Sqlite($p) => $body,
        }
    };
}
pub(super) use with_pool;

impl Store {
    /// Connects to `url`: `postgres://…` or `sqlite://PATH` (the file is created).
    pub async fn connect(url: &str) -> Result<Store> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(Duration::from_secs(10))
                .connect(url)
                .await
                .context("cannot connect to PostgreSQL (DATABASE_URL)")?;
            Ok(Store::from_pg(pool))
        } else if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)
                .context("bad SQLite URL")?
                .create_if_missing(true);
            Store::open_sqlite_with(opts).await
        } else {
            bail!("DATABASE_URL must start with postgres://, postgresql:// or sqlite:")
        }
    }

    /// Opens (creating it if needed) an SQLite database file.
    pub async fn open_sqlite(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        Store::open_sqlite_with(opts).await
    }

    async fn open_sqlite_with(opts: SqliteConnectOptions) -> Result<Store> {
        let opts = opts
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        // One connection: SQLite has one writer anyway, and a single connection never
        // meets SQLITE_BUSY between its own transactions. Queries are short.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await
            .context("cannot open the SQLite database")?;
        Ok(Store::from_sqlite(pool))
    }

    pub fn from_pg(pool: PgPool) -> Store {
        Store {
            pool: Pool::Pg(pool),
        }
    }

    pub(crate) fn from_sqlite(pool: SqlitePool) -> Store {
        Store {
            pool: Pool::Sqlite(pool),
        }
    }

    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Pg(_) => Backend::Postgres,
            Pool::Sqlite(_) => Backend::Sqlite,
        }
    }

    pub(crate) fn migrator(backend: Backend) -> &'static Migrator {
        match backend {
            Backend::Postgres => &PG_MIGRATOR,
            Backend::Sqlite => &SQLITE_MIGRATOR,
        }
    }

    /// The latest migration version this build knows.
    pub fn latest_migration(backend: Backend) -> i64 {
        Store::migrator(backend)
            .iter()
            .map(|m| m.version)
            .max()
            .unwrap_or(0)
    }

    /// Applies every pending migration (PostgreSQL takes an advisory lock, so
    /// replicas starting together are safe).
    pub async fn migrate(&self) -> Result<()> {
        self.migrate_to(None).await
    }

    /// Applies the migrations up to and including `version` (all when None). Tests
    /// use it to build a database of an older version.
    pub async fn migrate_to(&self, version: Option<i64>) -> Result<()> {
        let full = Store::migrator(self.backend());
        let migrator = version.map(|v| Migrator {
            migrations: full
                .iter()
                .filter(|m| m.version <= v)
                .cloned()
                .collect::<Vec<_>>()
                .into(),
            ignore_missing: true,
            locking: full.locking,
            no_tx: full.no_tx,
        });
        let migrator = migrator.as_ref().unwrap_or(full);
        with_pool!(self, p => migrator.run(p).await).context("applying migrations")?;
        Ok(())
    }

    /// The highest migration version applied successfully (0 for an empty database).
    pub async fn applied_migration(&self) -> Result<i64> {
        let sql = "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success";
        let v: i64 = with_pool!(self, p => sqlx::query_scalar(sql).fetch_one(p).await?);
        Ok(v)
    }

    /// Is the database reachable and fully migrated? (`/readyz`)
    pub async fn ready(&self) -> Result<()> {
        let applied = self
            .applied_migration()
            .await
            .context("database not reachable or not migrated")?;
        let latest = Store::latest_migration(self.backend());
        if applied < latest {
            bail!("database at migration {applied}, this build needs {latest}");
        }
        Ok(())
    }

    /// Executes raw SQL (several statements allowed). For tests and seed data.
    pub async fn execute_script(&self, sql: &str) -> Result<()> {
        with_pool!(self, p => sqlx::raw_sql(sql).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    pub async fn close(&self) {
        with_pool!(self, p => p.close().await)
    }
}
