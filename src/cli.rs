//! The command line's settings (clap): flags and environment variables of `check`,
//! `serve`, `migrate` and `trends`, turned into the plain settings of the modules
//! that run them.

use crate::config::check_url;
use crate::evidence::prometheus::SourceSettings;
use crate::evidence::{PrometheusAuth, PrometheusSource};
use crate::github::{AppIdentity, GitHubAuth, GitHubConfig, WebhookSecrets};
use crate::jobs::QueueConfig;
use crate::service::{github_web_url, serve, ServiceConfig};
use crate::store::Store;
use anyhow::{bail, Context, Result};
use secrecy::SecretString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How meshward talks to Prometheus, shared by `check --prometheus` and `serve`.
/// Credentials only from the environment (flags would show in `ps`), never from a
/// repository.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct PrometheusClientArgs {
    /// Bearer token for Prometheus.
    #[arg(
        long,
        env = "MESHWARD_PROMETHEUS_BEARER_TOKEN",
        hide = true,
        hide_env_values = true
    )]
    pub prometheus_bearer_token: Option<String>,
    /// Basic auth user for Prometheus (with MESHWARD_PROMETHEUS_PASSWORD).
    #[arg(long, env = "MESHWARD_PROMETHEUS_USERNAME", hide = true)]
    pub prometheus_username: Option<String>,
    #[arg(
        long,
        env = "MESHWARD_PROMETHEUS_PASSWORD",
        hide = true,
        hide_env_values = true
    )]
    pub prometheus_password: Option<String>,
    /// Seconds each Prometheus request may take (the whole gathering: three times that).
    #[arg(long, env = "MESHWARD_PROMETHEUS_TIMEOUT_SECS", default_value_t = 10)]
    pub prometheus_timeout_secs: u64,
}

impl PrometheusClientArgs {
    pub fn auth(&self) -> anyhow::Result<PrometheusAuth> {
        let set = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        match (
            set(&self.prometheus_bearer_token),
            set(&self.prometheus_username),
            set(&self.prometheus_password),
        ) {
            (None, None, None) => Ok(PrometheusAuth::None),
            (Some(t), None, None) => Ok(PrometheusAuth::Bearer(SecretString::from(t))),
            (None, Some(username), Some(p)) => Ok(PrometheusAuth::Basic {
                username,
                password: SecretString::from(p),
            }),
            (Some(_), _, _) => anyhow::bail!(
                "set either MESHWARD_PROMETHEUS_BEARER_TOKEN or MESHWARD_PROMETHEUS_USERNAME and MESHWARD_PROMETHEUS_PASSWORD, not both"
            ),
            _ => anyhow::bail!(
                "Prometheus basic auth needs both MESHWARD_PROMETHEUS_USERNAME and MESHWARD_PROMETHEUS_PASSWORD"
            ),
        }
    }

    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.prometheus_timeout_secs.clamp(1, 300))
    }
}

/// Where the history store lives.
#[derive(clap::Args, Clone)]
pub struct DbArgs {
    /// PostgreSQL (`postgres://…`) or SQLite (`sqlite://PATH`) URL. Without it, an
    /// SQLite file in the data folder.
    #[arg(long = "database-url", env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Folder of the embedded SQLite database (when no DATABASE_URL is given).
    #[arg(long, env = "MESHWARD_DATA_DIR", default_value = "./meshward-data")]
    pub data_dir: PathBuf,
}

impl DbArgs {
    pub async fn open(&self) -> Result<Store> {
        match &self.database_url {
            Some(url) if !url.is_empty() => Store::connect(url).await,
            _ => {
                let path = self.data_dir.join("meshward.db");
                tracing::info!(path = %path.display(), "no DATABASE_URL: using the embedded SQLite store");
                Store::open_sqlite(&path).await
            }
        }
    }
}

impl DbArgs {
    /// Opens a store that must already exist and be migrated (read-only tools: they
    /// never create an empty database or change its schema).
    pub async fn open_existing(&self) -> Result<Store> {
        let store = match &self.database_url {
            Some(url) if !url.is_empty() => {
                if let Some(path) = url
                    .strip_prefix("sqlite://")
                    .or_else(|| url.strip_prefix("sqlite:"))
                {
                    let path = path.split('?').next().unwrap_or(path);
                    if !path.is_empty()
                        && path != ":memory:"
                        && !std::path::Path::new(path).exists()
                    {
                        bail!("no database at {path} (DATABASE_URL)");
                    }
                }
                Store::connect(url).await?
            }
            _ => {
                let path = self.data_dir.join("meshward.db");
                if !path.exists() {
                    bail!(
                        "no database at {}: set DATABASE_URL, or --data-dir to the folder `meshward serve` uses",
                        path.display()
                    );
                }
                Store::open_sqlite(&path).await?
            }
        };
        store.ready().await.context(
            "the history store cannot be read: run `meshward migrate` with this build first",
        )?;
        Ok(store)
    }
}

/// `meshward trends`: a repository's coverage over time, from the history store.
#[derive(clap::Args, Clone)]
pub struct TrendsArgs {
    /// The repository, `owner/name`.
    #[arg(long)]
    pub repo: String,
    /// Start: RFC 3339, a date (UTC), `now`, or an age such as 30d [default: 30 days before --to].
    #[arg(long)]
    pub from: Option<String>,
    /// End (exclusive): same forms as --from [default: now].
    #[arg(long)]
    pub to: Option<String>,
    /// Bucket width; each bucket shows the last baseline that finished in it.
    #[arg(long, value_enum, default_value = "day")]
    pub interval: crate::trends::Interval,
    /// One cluster instead of the whole repository (the output lists the clusters).
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// One namespace instead of the whole repository (with --cluster: in that cluster;
    /// without: added up over the clusters that have it).
    #[arg(long)]
    pub namespace: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: crate::trends::render::TrendsFormat,
    #[command(flatten)]
    pub db: DbArgs,
}

/// `meshward trends`: the rendered series. Errors name the flag or the store.
pub fn trends_blocking(args: TrendsArgs) -> Result<String> {
    use crate::trends::{self, Range, Scope};
    let now = chrono::Utc::now().timestamp_millis();
    let range = Range::new(args.from.as_deref(), args.to.as_deref(), args.interval, now)
        .map_err(|e| anyhow::anyhow!("--{e}"))?;
    let scope = Scope {
        cluster: trends::cluster_name(args.cluster.as_deref())
            .map_err(|e| anyhow::anyhow!("--{e}"))?,
        namespace: args.namespace.as_deref(),
    };
    runtime()?.block_on(async {
        let store = args.db.open_existing().await?;
        let series = trends::load_series(&store, &args.repo, scope, &range).await;
        store.close().await;
        let series = series.map_err(|e| match e {
            // Named as the flag, as the other bad flags are.
            trends::LoadError::UnknownCluster { .. } => anyhow::anyhow!("--{e}"),
            e => e.into(),
        })?;
        trends::render::render(&series, args.format)
    })
}

/// `meshward serve`. Secrets come from the environment (flags would show in `ps`).
#[derive(clap::Args, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "MESHWARD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    #[command(flatten)]
    pub db: DbArgs,
    /// Webhook secrets, comma-separated (several during a rotation).
    #[arg(
        long,
        env = "MESHWARD_WEBHOOK_SECRET",
        hide = true,
        hide_env_values = true
    )]
    pub webhook_secret: Option<String>,
    /// GitHub App id (App mode, with a private key).
    #[arg(long, env = "MESHWARD_GITHUB_APP_ID")]
    pub github_app_id: Option<u64>,
    /// The App's slug: events its bot user `<slug>[bot]` causes are ignored.
    #[arg(long, env = "MESHWARD_GITHUB_APP_SLUG")]
    pub github_app_slug: Option<String>,
    /// File holding the App's private key (PEM).
    #[arg(long, env = "MESHWARD_GITHUB_PRIVATE_KEY_PATH")]
    pub github_private_key_path: Option<PathBuf>,
    /// The App's private key itself (PEM), instead of a file.
    #[arg(
        long,
        env = "MESHWARD_GITHUB_PRIVATE_KEY",
        hide = true,
        hide_env_values = true
    )]
    pub github_private_key: Option<String>,
    /// A plain token instead of an App (single-repo use).
    #[arg(
        long,
        env = "MESHWARD_GITHUB_TOKEN",
        hide = true,
        hide_env_values = true
    )]
    pub github_token: Option<String>,
    /// GitHub API root (GitHub Enterprise: `https://HOST/api/v3`).
    #[arg(long, env = "MESHWARD_GITHUB_API_URL")]
    pub github_api_url: Option<String>,
    /// Seconds of silence after which a GitHub call fails (connecting: at most 10).
    #[arg(long, env = "MESHWARD_GITHUB_TIMEOUT_SECS", default_value_t = 30)]
    pub github_timeout_secs: u64,
    /// Seconds one GitHub call may take in all, answer included (a tarball is the
    /// largest); then it fails and is retried, or its job is.
    #[arg(long, env = "MESHWARD_GITHUB_CALL_TIMEOUT_SECS", default_value_t = 300)]
    pub github_call_timeout_secs: u64,
    /// meshward's address as people reach it (`https://meshward.example.com`): check
    /// runs link to the run's page under it.
    #[arg(long, env = "MESHWARD_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Concurrent workers in this process (0: take webhooks only).
    #[arg(long, env = "MESHWARD_WORKERS", default_value_t = 2)]
    pub workers: usize,
    /// Seconds a claimed job stays reserved without a heartbeat.
    #[arg(long, env = "MESHWARD_JOB_LEASE_SECS", default_value_t = 300)]
    pub lease_secs: u64,
    /// Attempts before a job is marked failed.
    #[arg(long, env = "MESHWARD_JOB_MAX_ATTEMPTS", default_value_t = 5)]
    pub max_attempts: i64,
    /// Seconds before the first retry of a failed job (doubled for each further one).
    #[arg(long, env = "MESHWARD_JOB_BACKOFF_SECS", default_value_t = 10)]
    pub backoff_secs: u64,
    /// Milliseconds between looks at the queue when idle.
    #[arg(long, env = "MESHWARD_POLL_MS", default_value_t = 2000)]
    pub poll_ms: u64,
    /// Seconds in-flight jobs may take after SIGTERM before they are given back.
    #[arg(long, env = "MESHWARD_SHUTDOWN_GRACE_SECS", default_value_t = 30)]
    pub shutdown_grace_secs: u64,
    /// Seconds a job may spend downloading and unpacking its commits.
    #[arg(long, env = "MESHWARD_JOB_FETCH_SECS", default_value_t = 600)]
    pub job_fetch_secs: u64,
    /// Seconds a job may spend checking (rendering and evaluating) its commits.
    #[arg(long, env = "MESHWARD_JOB_CHECK_SECS", default_value_t = 900)]
    pub job_check_secs: u64,
    /// Seconds a job may spend storing and publishing its result.
    #[arg(long, env = "MESHWARD_JOB_PUBLISH_SECS", default_value_t = 300)]
    pub job_publish_secs: u64,
    /// Largest webhook body accepted, in bytes.
    #[arg(long, env = "MESHWARD_MAX_BODY_BYTES", default_value_t = 25 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Seconds a client has to send a request's headers, and a kept-alive connection
    /// may sit idle.
    #[arg(long, env = "MESHWARD_HTTP_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub http_header_timeout_secs: u64,
    /// Seconds one HTTP request may take, body and answer included (then 408).
    #[arg(long, env = "MESHWARD_HTTP_REQUEST_TIMEOUT_SECS", default_value_t = 60)]
    pub http_request_timeout_secs: u64,
    /// Do not apply migrations at start (run `meshward migrate` separately).
    #[arg(long, env = "MESHWARD_SKIP_MIGRATIONS")]
    pub skip_migrations: bool,
    /// Default Prometheus for zero-plaintext evidence (a repository's
    /// evidence.prometheus.url, if allowed, wins).
    #[arg(long, env = "MESHWARD_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,
    /// Further Prometheus URLs repositories may name, comma-separated (credentials are
    /// sent to them too).
    #[arg(long, env = "MESHWARD_PROMETHEUS_ALLOWED_URLS", value_delimiter = ',')]
    pub prometheus_allowed_urls: Vec<String>,
    /// Evidence window when a repository names none.
    #[arg(long, env = "MESHWARD_EVIDENCE_WINDOW", default_value = "7d")]
    pub evidence_window: String,
    /// Seconds a Prometheus answer is reused for the same query.
    #[arg(long, env = "MESHWARD_EVIDENCE_CACHE_SECS", default_value_t = 300)]
    pub evidence_cache_secs: u64,
    #[command(flatten)]
    pub prometheus_client: PrometheusClientArgs,
    /// Tokens for the trends API and dashboard, comma-separated; none: both are off.
    #[arg(long, env = "MESHWARD_API_TOKENS", hide = true, hide_env_values = true)]
    pub api_tokens: Option<String>,
    /// How long a dashboard login lasts, in hours.
    #[arg(long, env = "MESHWARD_SESSION_HOURS", default_value_t = 12)]
    pub session_hours: u64,
    /// PR runs older than this many days are deleted (baselines are kept); 0 keeps all.
    #[arg(long, env = "MESHWARD_PR_RUN_RETENTION_DAYS", default_value_t = 90)]
    pub pr_run_retention_days: u64,
    /// Where dashboard links to pull requests and commits point [default: from the API URL].
    #[arg(long, env = "MESHWARD_GITHUB_WEB_URL")]
    pub github_web_url: Option<String>,
}

#[derive(clap::Args, Clone)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub db: DbArgs,
}

impl ServeArgs {
    pub fn config(&self) -> Result<ServiceConfig> {
        let secrets = WebhookSecrets::parse(&SecretString::from(
            self.webhook_secret.clone().unwrap_or_default(),
        ));
        let auth = match (&self.github_app_id, &self.github_token) {
            (Some(app_id), _) => {
                let pem = match (&self.github_private_key, &self.github_private_key_path) {
                    (Some(pem), _) if !pem.trim().is_empty() => pem.clone(),
                    (_, Some(path)) => std::fs::read_to_string(path).with_context(|| {
                        format!("cannot read the GitHub App private key {}", path.display())
                    })?,
                    _ => bail!(
                        "MESHWARD_GITHUB_APP_ID is set but no private key: set MESHWARD_GITHUB_PRIVATE_KEY_PATH or MESHWARD_GITHUB_PRIVATE_KEY"
                    ),
                };
                Some(GitHubAuth::App {
                    app_id: *app_id,
                    private_key_pem: SecretString::from(pem),
                })
            }
            (None, Some(token)) if !token.is_empty() => {
                Some(GitHubAuth::Token(SecretString::from(token.clone())))
            }
            _ => None,
        };
        if self.max_attempts < 1 {
            bail!("--max-attempts must be at least 1");
        }
        let allowed_urls: Vec<String> = self
            .prometheus_allowed_urls
            .iter()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect();
        for url in self.prometheus_url.iter().chain(&allowed_urls) {
            check_url(url).map_err(|e| anyhow::anyhow!("Prometheus URL: {e}"))?;
        }
        crate::units::duration::parse(&self.evidence_window)
            .map_err(|e| anyhow::anyhow!("MESHWARD_EVIDENCE_WINDOW: {e}"))?;
        let evidence = Arc::new(PrometheusSource::new(SourceSettings {
            url: self.prometheus_url.clone().filter(|u| !u.trim().is_empty()),
            allowed_urls,
            url_from_repo: true,
            window: self.evidence_window.clone(),
            window_override: None,
            auth: self.prometheus_client.auth()?,
            timeout: self.prometheus_client.timeout(),
            cache_ttl: Duration::from_secs(self.evidence_cache_secs),
        }));
        if self.session_hours == 0 || self.session_hours > 24 * 30 {
            bail!("--session-hours (MESHWARD_SESSION_HOURS) must be between 1 and 720");
        }
        let tokens = crate::server::auth::ApiTokens::parse(&SecretString::from(
            self.api_tokens.clone().unwrap_or_default(),
        ))?;
        Ok(ServiceConfig {
            listen: self.listen.clone(),
            secrets,
            app: AppIdentity {
                id: self.github_app_id.map(|i| i as i64),
                slug: self.github_app_slug.clone(),
            },
            github: auth.map(|auth| GitHubConfig {
                timeouts: crate::github::Timeouts {
                    connect: Duration::from_secs(self.github_timeout_secs.clamp(1, 10)),
                    read: Duration::from_secs(self.github_timeout_secs.max(1)),
                    call: Duration::from_secs(self.github_call_timeout_secs.max(1)),
                },
                ..GitHubConfig::new(self.github_api_url.clone(), auth)
            }),
            public_url: self
                .public_url
                .clone()
                .filter(|u| !u.trim().is_empty())
                .map(|u| u.trim_end_matches('/').to_string()),
            queue: QueueConfig {
                workers: self.workers,
                lease: Duration::from_secs(self.lease_secs.max(1)),
                max_attempts: self.max_attempts,
                poll_interval: Duration::from_millis(self.poll_ms.max(10)),
                backoff_base: Duration::from_secs(self.backoff_secs),
                shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
                phases: crate::jobs::PhaseDeadlines {
                    fetch: Duration::from_secs(self.job_fetch_secs.max(1)),
                    check: Duration::from_secs(self.job_check_secs.max(1)),
                    publish: Duration::from_secs(self.job_publish_secs.max(1)),
                },
                ..QueueConfig::default()
            },
            max_body_bytes: self.max_body_bytes,
            listen_limits: crate::server::listen::ListenLimits {
                header_read: Duration::from_secs(self.http_header_timeout_secs.max(1)),
                request: Duration::from_secs(self.http_request_timeout_secs.max(1)),
                ..Default::default()
            },
            skip_migrations: self.skip_migrations,
            evidence,
            api: crate::server::ApiConfig {
                tokens,
                session_ttl: Duration::from_secs(self.session_hours * 3600),
                github_web_url: self
                    .github_web_url
                    .clone()
                    .unwrap_or_else(|| github_web_url(self.github_api_url.as_deref())),
            },
            pr_run_retention: (self.pr_run_retention_days > 0)
                .then(|| Duration::from_secs(self.pr_run_retention_days * 86_400)),
        })
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// `meshward migrate`: applies pending migrations and says where the database is.
pub fn migrate_blocking(args: MigrateArgs) -> Result<String> {
    runtime()?.block_on(async {
        let store = args.db.open().await?;
        store.migrate().await?;
        let v = store.applied_migration().await?;
        store.close().await;
        Ok(format!("database migrated to version {v}"))
    })
}

/// `meshward serve`: runs until SIGTERM or ctrl-c.
pub fn serve_blocking(args: ServeArgs) -> Result<()> {
    let config = args.config()?;
    runtime()?.block_on(async move {
        let store = args.db.open().await?;
        let shutdown = CancellationToken::new();
        let signal = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!(
                "shutting down: no new jobs; in-flight ones finish or go back to the queue"
            );
            signal.cancel();
        });
        serve(config, store, shutdown).await
    })
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = ctrl_c => {}
            _ = async {
                match term.as_mut() {
                    Some(t) => { t.recv().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn config(args: &[&str]) -> Result<ServiceConfig> {
        let mut argv = vec!["meshward"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)?.serve.config()
    }

    #[test]
    fn app_mode_needs_a_private_key_from_a_file_or_the_environment() {
        let err = config(&["--github-app-id", "12"]).err().expect("no key");
        assert!(format!("{err:#}").contains("no private key"), "{err:#}");
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("key.pem");
        std::fs::write(&pem, "-----BEGIN RSA PRIVATE KEY-----\n").unwrap();
        let c = config(&[
            "--github-app-id",
            "12",
            "--github-private-key-path",
            pem.to_str().unwrap(),
            "--github-app-slug",
            "meshward",
        ])
        .unwrap();
        assert!(matches!(
            c.github.as_ref().map(|g| &g.auth),
            Some(GitHubAuth::App { app_id: 12, .. })
        ));
        assert_eq!(c.app.id, Some(12));
        assert_eq!(c.app.slug.as_deref(), Some("meshward"));
        let missing = config(&[
            "--github-app-id",
            "12",
            "--github-private-key-path",
            "/nonexistent/key.pem",
        ]);
        assert!(missing.is_err());
    }

    #[test]
    fn token_mode_and_defaults() {
        let c = config(&["--github-token", "t0ken", "--webhook-secret", "a, b"]).unwrap();
        assert!(matches!(
            c.github.as_ref().map(|g| &g.auth),
            Some(GitHubAuth::Token(_))
        ));
        assert_eq!(c.secrets.len(), 2);
        assert_eq!(c.listen, "127.0.0.1:8080");
        assert_eq!(c.queue.workers, 2);
        assert_eq!(c.queue.lease, Duration::from_secs(300));
        assert_eq!(c.queue.max_attempts, 5);
        assert_eq!(c.max_body_bytes, 25 * 1024 * 1024);
        let none = config(&[]).unwrap();
        assert!(none.github.is_none());
        assert!(none.secrets.is_empty());
        assert!(config(&["--max-attempts", "0"]).is_err());
    }

    #[test]
    fn trends_settings_tokens_retention_and_links() {
        let c = config(&[]).unwrap();
        assert!(c.api.tokens.is_empty(), "no tokens: API and dashboard off");
        assert_eq!(c.api.session_ttl, Duration::from_secs(12 * 3600));
        assert_eq!(c.pr_run_retention, Some(Duration::from_secs(90 * 86_400)));
        assert_eq!(c.api.github_web_url, "https://github.com");
        let c = config(&[
            "--api-tokens",
            "0123456789abcdef,fedcba9876543210",
            "--pr-run-retention-days",
            "0",
            "--session-hours",
            "1",
            "--github-api-url",
            "https://ghe.example.com/api/v3/",
        ])
        .unwrap();
        assert_eq!(c.api.tokens.len(), 2);
        assert_eq!(c.pr_run_retention, None, "0 keeps every run");
        assert_eq!(c.api.session_ttl, Duration::from_secs(3600));
        assert_eq!(c.api.github_web_url, "https://ghe.example.com");
        let short = config(&["--api-tokens", "short"]).err().expect("refused");
        assert!(
            format!("{short:#}").contains("shorter than 16"),
            "{short:#}"
        );
        assert!(config(&["--session-hours", "0"]).is_err());
    }
}
