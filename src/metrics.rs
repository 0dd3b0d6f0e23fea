//! Prometheus metrics of the service, in a registry of its own (so tests can run
//! several services in one process).

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Webhook deliveries by event and outcome (enqueued, repos, ignored, duplicate,
    /// unauthorized, bad_request, error).
    pub deliveries: IntCounterVec,
    /// Jobs by state, read from the database at each scrape.
    pub jobs: IntGaugeVec,
    /// Jobs waiting to run (queued), read from the database at each scrape.
    pub queue_depth: IntGauge,
    /// How long jobs ran, by kind and outcome (succeeded, retry, failed, lost, released).
    pub job_duration: HistogramVec,
    /// GitHub API calls by HTTP status (or `error` when no response came).
    pub github_calls: IntCounterVec,
    /// Check results by kind and outcome (pass, fail, error).
    pub check_results: IntCounterVec,
    /// The latest baseline's coverage per repository (set at each scrape): one gauge
    /// per count, `meshward_coverage_<count>{repo}`.
    pub coverage: std::collections::BTreeMap<&'static str, IntGaugeVec>,
    /// The latest baseline's findings per repository, by severity.
    pub coverage_findings: IntGaugeVec,
    /// When the latest baseline with coverage finished, per repository.
    pub coverage_timestamp: IntGaugeVec,
    /// PR runs deleted by retention.
    pub runs_pruned: prometheus::IntCounter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let deliveries = IntCounterVec::new(
            Opts::new(
                "meshward_webhook_deliveries_total",
                "Webhook deliveries by event and outcome",
            ),
            &["event", "outcome"],
        )
        .expect("metric");
        let jobs = IntGaugeVec::new(
            Opts::new(
                "meshward_jobs",
                "Jobs in the queue by state (queued is the queue depth)",
            ),
            &["state"],
        )
        .expect("metric");
        let queue_depth = IntGauge::new(
            "meshward_queue_depth",
            "Jobs waiting to run (queued, due or backing off)",
        )
        .expect("metric");
        let job_duration = HistogramVec::new(
            HistogramOpts::new(
                "meshward_job_duration_seconds",
                "Job run time by kind and outcome",
            )
            .buckets(vec![
                0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
            ]),
            &["kind", "outcome"],
        )
        .expect("metric");
        let github_calls = IntCounterVec::new(
            Opts::new(
                "meshward_github_api_calls_total",
                "GitHub API calls by HTTP status",
            ),
            &["status"],
        )
        .expect("metric");
        let check_results = IntCounterVec::new(
            Opts::new(
                "meshward_check_results_total",
                "Stored runs by kind and outcome",
            ),
            &["kind", "outcome"],
        )
        .expect("metric");
        let coverage: std::collections::BTreeMap<&'static str, IntGaugeVec> =
            crate::store::CoverageNumbers::default()
                .counts()
                .iter()
                .map(|(name, _)| {
                    let gauge = IntGaugeVec::new(
                        Opts::new(
                            format!("meshward_coverage_{name}"),
                            format!(
                                "{} in the latest baseline on the default branch, per repository",
                                name.replace('_', " ")
                            ),
                        ),
                        &["repo"],
                    )
                    .expect("metric");
                    registry
                        .register(Box::new(gauge.clone()))
                        .expect("register");
                    (*name, gauge)
                })
                .collect();
        let coverage_findings = IntGaugeVec::new(
            Opts::new(
                "meshward_coverage_findings",
                "Findings in the latest baseline on the default branch, per repository and severity",
            ),
            &["repo", "severity"],
        )
        .expect("metric");
        let coverage_timestamp = IntGaugeVec::new(
            Opts::new(
                "meshward_coverage_timestamp_seconds",
                "When the latest baseline with coverage finished, per repository (Unix time)",
            ),
            &["repo"],
        )
        .expect("metric");
        let runs_pruned = prometheus::IntCounter::new(
            "meshward_runs_pruned_total",
            "PR runs deleted by retention",
        )
        .expect("metric");
        for g in [&coverage_findings, &coverage_timestamp] {
            registry.register(Box::new(g.clone())).expect("register");
        }
        registry
            .register(Box::new(runs_pruned.clone()))
            .expect("register");
        for c in [&deliveries, &github_calls, &check_results] {
            registry.register(Box::new(c.clone())).expect("register");
        }
        registry.register(Box::new(jobs.clone())).expect("register");
        registry
            .register(Box::new(queue_depth.clone()))
            .expect("register");
        registry
            .register(Box::new(job_duration.clone()))
            .expect("register");
        Metrics {
            registry,
            deliveries,
            jobs,
            queue_depth,
            job_duration,
            github_calls,
            check_results,
            coverage,
            coverage_findings,
            coverage_timestamp,
            runs_pruned,
        }
    }

    /// Sets the coverage gauges from each repository's latest baseline; repositories
    /// without one (or gone) have none.
    pub fn set_coverage(&self, repos: &[crate::store::RepoOverview]) {
        for g in self.coverage.values() {
            g.reset();
        }
        self.coverage_findings.reset();
        self.coverage_timestamp.reset();
        for r in repos {
            let Some(latest) = &r.latest else { continue };
            for (name, value) in latest.metrics.coverage.counts() {
                if let (Some(v), Some(g)) = (value, self.coverage.get(name)) {
                    g.with_label_values(&[r.full_name.as_str()]).set(v);
                }
            }
            let f = &latest.metrics.findings;
            for (severity, v) in [("error", f.error), ("warning", f.warning), ("info", f.info)] {
                self.coverage_findings
                    .with_label_values(&[r.full_name.as_str(), severity])
                    .set(v);
            }
            self.coverage_timestamp
                .with_label_values(&[r.full_name.as_str()])
                .set(latest.finished_at_ms / 1000);
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding");
        String::from_utf8(buf).unwrap_or_default()
    }
}
