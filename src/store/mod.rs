//! The history store and durable job queue: PostgreSQL in production, SQLite as the
//! embedded default. One API; every query is written once, in SQL both backends
//! accept (`$1` placeholders, `ON CONFLICT`, `RETURNING`), and run on whichever pool
//! the store holds. The only backend-specific statement is the claim, which adds
//! `FOR UPDATE SKIP LOCKED` on PostgreSQL.
//!
//! Rows are read into structs that derive `sqlx::FromRow` for any row type, so one
//! mapping serves both backends; enums stored as text derive `sqlx::Type`.
//!
//! Times are milliseconds since the Unix epoch, passed in by the caller (the queue's
//! clock), never read from the database: tests control time.

mod deliveries;
mod pool;
mod publications;
mod queue;
mod runs;
mod scopes;
mod trends;
mod types;

pub use pool::Backend;
pub use publications::{Publication, ReviewCommentRecord};
pub use types::*;

/// The store. Cheap to clone (it holds a connection pool).
#[derive(Clone)]
pub struct Store {
    pool: pool::Pool,
}
