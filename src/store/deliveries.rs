//! Webhook deliveries, recorded once each with what they ask for, and the
//! repositories the installation events tell about.

use super::pool::with_pool;
use super::queue::enqueue;
use super::{DeliveryEffect, DeliveryOutcome, NewDelivery, NewJob, RepoRecord, Store};
use anyhow::Result;

/// Inserts or updates a repository on `$conn` (a connection or transaction of either
/// backend). Fields the event does not carry keep their stored value.
macro_rules! upsert_repo {
    ($conn:expr, $repo:expr, $now:expr) => {{
        let repo: &$crate::store::RepoRecord = $repo;
        sqlx::query(
            "INSERT INTO repos (github_id, full_name, installation_id, default_branch, installed, updated_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (github_id) DO UPDATE SET full_name = excluded.full_name, \
                 installation_id = COALESCE(excluded.installation_id, repos.installation_id), \
                 default_branch = COALESCE(excluded.default_branch, repos.default_branch), \
                 installed = excluded.installed, updated_at_ms = excluded.updated_at_ms",
        )
        .bind(repo.github_id)
        .bind(&repo.full_name)
        .bind(repo.installation_id)
        .bind(&repo.default_branch)
        .bind(repo.installed)
        .bind($now)
        .execute($conn)
        .await?;
    }};
}

impl Store {
    /// Records a verified webhook delivery and applies what it asks for, in one
    /// transaction. A delivery id seen before changes nothing.
    pub async fn record_delivery(
        &self,
        delivery: &NewDelivery,
        effect: &DeliveryEffect,
        max_attempts: i64,
        now: i64,
    ) -> Result<DeliveryOutcome> {
        with_pool!(self, p => {
            let mut tx = p.begin().await?;
            let inserted = sqlx::query(
                "INSERT INTO deliveries (delivery_id, event, action, repo, outcome, received_at_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (delivery_id) DO NOTHING",
            )
            .bind(&delivery.delivery_id)
            .bind(&delivery.event)
            .bind(&delivery.action)
            .bind(&delivery.repo)
            .bind(&delivery.outcome)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                tx.rollback().await?;
                return Ok(DeliveryOutcome::Duplicate);
            }
            for repo in &effect.upsert_repos {
                upsert_repo!(&mut *tx, repo, now);
            }
            for id in &effect.remove_repos {
                sqlx::query("UPDATE repos SET installed = FALSE, updated_at_ms = $2 WHERE github_id = $1")
                    .bind(id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            if let Some(inst) = effect.remove_installation {
                sqlx::query("UPDATE repos SET installed = FALSE, updated_at_ms = $2 WHERE installation_id = $1")
                    .bind(inst)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            let mut jobs = Vec::new();
            for job in &effect.jobs {
                let job = NewJob {
                    delivery_id: Some(delivery.delivery_id.clone()),
                    ..job.clone()
                };
                jobs.push(enqueue!(&mut *tx, &job, max_attempts, now));
            }
            tx.commit().await?;
            Ok(DeliveryOutcome::Recorded { jobs })
        })
    }

    pub async fn delivery_count(&self) -> Result<i64> {
        let sql = "SELECT COUNT(*) FROM deliveries";
        let n: i64 = with_pool!(self, p => sqlx::query_scalar(sql).fetch_one(p).await?);
        Ok(n)
    }

    pub async fn upsert_repo(&self, repo: &RepoRecord, now: i64) -> Result<()> {
        with_pool!(self, p => {
            let mut conn = p.acquire().await?;
            upsert_repo!(&mut *conn, repo, now);
        });
        Ok(())
    }

    pub async fn repos(&self) -> Result<Vec<RepoRecord>> {
        let sql = "SELECT github_id, full_name, installation_id, default_branch, installed \
                   FROM repos ORDER BY full_name";
        let repos = with_pool!(self, p => sqlx::query_as::<_, RepoRecord>(sql).fetch_all(p).await?);
        Ok(repos)
    }
}
