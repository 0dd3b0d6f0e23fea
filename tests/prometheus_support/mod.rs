//! A real Prometheus for tests: Istio-shaped series are written as OpenMetrics,
//! turned into TSDB blocks by `promtool tsdb create-blocks-from openmetrics`, and
//! served by `prometheus` on a free loopback port; it is stopped when dropped.
//! Both come from the Debian package `prometheus` (scripts/install-tools).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One counter series: `value_per_step` more every 5 minutes over the last 3 hours.
#[derive(Clone)]
pub struct Series {
    pub metric: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value_per_step: u64,
}

pub const STEP_SECS: i64 = 300;
pub const HISTORY_SECS: i64 = 3 * 3600;

/// Server-side traffic into `workload` in `namespace`, as Istio's sidecars report it.
pub fn inbound(
    metric: &'static str,
    namespace: &str,
    workload: &str,
    security: &str,
    cluster: &str,
    per_step: u64,
) -> Series {
    Series {
        metric,
        labels: vec![
            ("reporter", "destination".into()),
            ("source_workload", "frontend".into()),
            ("source_workload_namespace", "web".into()),
            ("destination_workload", workload.into()),
            ("destination_workload_namespace", namespace.into()),
            (
                "destination_service",
                format!("{workload}.{namespace}.svc.cluster.local"),
            ),
            ("connection_security_policy", security.into()),
            ("response_code", "200".into()),
            ("cluster", cluster.into()),
        ],
        value_per_step: per_step,
    }
}

/// Server-side traffic into an ambient workload, as the destination's ztunnel reports
/// it: TCP metrics only, plaintext as `unknown`, no response code.
pub fn ztunnel_inbound(
    metric: &'static str,
    namespace: &str,
    workload: &str,
    security: &str,
    cluster: &str,
    per_step: u64,
) -> Series {
    let mut s = inbound(metric, namespace, workload, security, cluster, per_step);
    s.labels.retain(|(k, _)| *k != "response_code");
    s.labels.push(("request_protocol", "tcp".into()));
    s
}

/// The same traffic as the client side reports it (must never count).
pub fn client_side(mut s: Series) -> Series {
    for (k, v) in s.labels.iter_mut() {
        if *k == "reporter" {
            *v = "source".into();
        }
        if *k == "connection_security_policy" {
            *v = "unknown".into();
        }
    }
    s
}

fn find_tool(name: &str) -> PathBuf {
    let env = format!("MESHWARD_TEST_{}", name.to_ascii_uppercase());
    if let Some(p) = std::env::var_os(&env) {
        return PathBuf::from(p);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} not found: these tests need a real Prometheus (Debian package prometheus; scripts/install-tools installs it, or set {env})"
            )
        })
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// OpenMetrics text for the series, samples from now-3h to now-1m.
fn openmetrics(series: &[Series], now: i64) -> String {
    let mut out = String::new();
    let mut metrics: Vec<&str> = series.iter().map(|s| s.metric).collect();
    metrics.sort();
    metrics.dedup();
    for metric in metrics {
        out.push_str(&format!("# TYPE {metric} counter\n"));
        for s in series.iter().filter(|s| s.metric == metric) {
            let labels: Vec<String> = s
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect();
            let start = now - HISTORY_SECS;
            let mut t = start;
            while t < now - 60 {
                let v = (t - start) / STEP_SECS * s.value_per_step as i64;
                out.push_str(&format!("{metric}{{{}}} {v} {t}\n", labels.join(",")));
                t += STEP_SECS;
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

pub struct Prometheus {
    child: Child,
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts a server over `series`, keeping data for `retention`.
    pub fn start(series: &[Series], retention: &str) -> Prometheus {
        Prometheus::start_with(series, retention, None)
    }

    /// The same, with a web config (e.g. basic auth users) for `--web.config.file`.
    pub fn start_with(series: &[Series], retention: &str, web_config: Option<&str>) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data dir");
        if !series.is_empty() {
            let om = dir.path().join("series.om");
            std::fs::write(&om, openmetrics(series, chrono::Utc::now().timestamp()))
                .expect("write openmetrics");
            let out = Command::new(find_tool("promtool"))
                .args(["tsdb", "create-blocks-from", "openmetrics"])
                .arg(&om)
                .arg(&data)
                .output()
                .expect("promtool runs");
            assert!(
                out.status.success(),
                "promtool: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, "global: {}\n").expect("config");
        let mut web = Vec::new();
        if let Some(text) = web_config {
            let path = dir.path().join("web.yml");
            std::fs::write(&path, text).expect("web config");
            web.push(format!("--web.config.file={}", path.display()));
        }
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
        let child = Command::new(find_tool("prometheus"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--storage.tsdb.retention.time={retention}"))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(&web)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        let mut p = Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
        };
        p.wait_ready(port);
        p
    }

    fn wait_ready(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "prometheus exited ({status}): {}",
                    std::fs::read_to_string(self.dir.path().join("prometheus.log"))
                        .unwrap_or_default()
                );
            }
            // 401: up, behind basic auth.
            if matches!(http_status(port, "/-/ready"), Some(200 | 401)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("prometheus did not become ready within 60s");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Prometheus {
    /// How many instant queries the server has answered (its own
    /// `prometheus_http_requests_total` for the query endpoint).
    pub fn query_requests(&self) -> u64 {
        let port: u16 = self
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port");
        let body = http_get(port, "/metrics").expect("metrics answer");
        body.lines()
            .filter(|l| {
                l.starts_with("prometheus_http_requests_total{")
                    && l.contains("handler=\"/api/v1/query\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The status code of a plain GET, or None without an answer.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    let head = String::from_utf8_lossy(&buf[..n]);
    head.split_whitespace().nth(1)?.parse().ok()
}

/// A server that takes connections and never answers (a hung Prometheus). Its
/// socket closes when dropped.
pub struct Silent {
    _listener: TcpListener,
    pub url: String,
}

pub fn silent_server() -> Silent {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    Silent {
        _listener: listener,
        url,
    }
}

pub fn data_dir(p: &Prometheus) -> &Path {
    p.dir.path()
}
