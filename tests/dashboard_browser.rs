//! The dashboard in a real headless Chromium (Debian's `chromium`, installed by
//! scripts/install-tools), driven over the DevTools protocol: log in with a token,
//! see the repositories, a repository's charts with the seeded points, drill down
//! into a namespace; no console errors (script, CSP or failed loads) on any page.
//! Screenshots are saved under target/test-artifacts/.
//!
//! The protocol client is the few commands this test needs, over tokio-tungstenite:
//! a full CDP crate (chromiumoxide, headless_chrome) would add minutes of compile
//! time for its generated protocol bindings on a 2-core CI, for six methods.

use crate::service_support;

use futures_util::{SinkExt, StreamExt};
use meshward::clock::Clock;
use meshward::metrics::Metrics;
use meshward::server;
use serde_json::{json, Value};
use service_support::seed::{self, DAY, HOUR, T0};
use service_support::*;
use std::collections::HashMap;
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

const TIMEOUT: Duration = Duration::from_secs(30);

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// A DevTools session attached to one page.
struct Page {
    out: mpsc::UnboundedSender<String>,
    pending: Pending,
    events: broadcast::Sender<Value>,
    log: Arc<Mutex<Vec<Value>>>,
    next_id: AtomicU64,
    session: String,
}

impl Page {
    async fn connect(ws_url: &str) -> Page {
        let (ws, _) = tokio_tungstenite::connect_async(ws_url)
            .await
            .expect("DevTools websocket");
        let (mut sink, mut stream) = ws.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(text) = out_rx.recv().await {
                if sink.send(Message::text(text)).await.is_err() {
                    break;
                }
            }
        });
        let pending: Pending = Arc::default();
        let (events, _) = broadcast::channel(4096);
        let log: Arc<Mutex<Vec<Value>>> = Arc::default();
        {
            let (pending, events, log) = (pending.clone(), events.clone(), log.clone());
            tokio::spawn(async move {
                while let Some(Ok(msg)) = stream.next().await {
                    let Message::Text(text) = msg else { continue };
                    let Ok(v) = serde_json::from_str::<Value>(text.as_str()) else {
                        continue;
                    };
                    if let Some(id) = v["id"].as_u64() {
                        if let Some(tx) = pending.lock().unwrap().remove(&id) {
                            let _ = tx.send(v);
                        }
                    } else {
                        log.lock().unwrap().push(v.clone());
                        let _ = events.send(v);
                    }
                }
            });
        }
        let mut page = Page {
            out,
            pending,
            events,
            log,
            next_id: AtomicU64::new(1),
            session: String::new(),
        };
        let target = page
            .call("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = page
            .call(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        page.session = attached["sessionId"].as_str().expect("session").to_string();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            page.call(domain, json!({})).await;
        }
        page.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 1600, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await;
        page
    }

    async fn call(&self, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        self.out.send(msg.to_string()).expect("websocket open");
        let resp = tokio::time::timeout(TIMEOUT, rx)
            .await
            .unwrap_or_else(|_| panic!("{method}: no answer in {TIMEOUT:?}"))
            .expect("answer");
        assert!(resp["error"].is_null(), "{method}: {}", resp["error"]);
        resp["result"].clone()
    }

    /// Runs `action` and waits for the page it leads to to finish loading.
    async fn load<F: std::future::Future>(&self, action: F) {
        let mut rx = self.events.subscribe();
        action.await;
        let wait = async {
            loop {
                match rx.recv().await {
                    Ok(e) if e["method"] == "Page.loadEventFired" => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(e) => panic!("DevTools connection closed: {e}"),
                }
            }
        };
        tokio::time::timeout(TIMEOUT, wait)
            .await
            .expect("the page loads in time");
    }

    async fn goto(&self, url: &str) {
        self.load(async {
            self.call("Page.navigate", json!({"url": url})).await;
        })
        .await;
    }

    async fn eval(&self, js: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(
            r["exceptionDetails"].is_null(),
            "{js}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    async fn screenshot(&self, name: &str) -> std::path::PathBuf {
        use base64::Engine;
        let r = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("png data"))
            .expect("base64");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
        std::fs::create_dir_all(&dir).expect("artifact dir");
        let path = dir.join(name);
        std::fs::write(&path, &png).expect("screenshot");
        assert!(png.len() > 10_000, "a real screenshot, not a blank one");
        path
    }

    /// Console errors, uncaught exceptions and error log entries (failed loads,
    /// CSP violations) seen so far.
    fn errors(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e["method"].as_str()? {
                "Runtime.consoleAPICalled"
                    if matches!(e["params"]["type"].as_str(), Some("error" | "assert")) =>
                {
                    Some(format!("console: {}", e["params"]["args"]))
                }
                "Runtime.exceptionThrown" => Some(format!(
                    "exception: {}",
                    e["params"]["exceptionDetails"]["text"]
                )),
                "Log.entryAdded" if e["params"]["entry"]["level"] == "error" => Some(format!(
                    "log: {} ({})",
                    e["params"]["entry"]["text"], e["params"]["entry"]["url"]
                )),
                _ => None,
            })
            .collect()
    }
}

/// Headless Chromium with a fresh profile; killed when dropped.
struct Browser {
    child: std::process::Child,
    ws_url: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = std::process::Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("chromium runs (scripts/install-tools installs the Debian package)");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let ws_url = rx
            .recv_timeout(TIMEOUT)
            .expect("chromium prints its DevTools address");
        Browser {
            child,
            ws_url,
            _profile: profile,
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The axis labels of the page's charts that the browser draws (`getBBox`, in the
/// viewBox's units) past an edge of their drawing, and how many x labels there are.
async fn labels_outside(page: &Page) -> (Value, i64) {
    let v = page
        .eval(
            "(() => {
                const out = [];
                let xlabels = 0;
                for (const svg of document.querySelectorAll('svg.chart')) {
                    const vb = svg.viewBox.baseVal;
                    for (const t of svg.querySelectorAll('text.xlabel, text.ylabel')) {
                        if (t.classList.contains('xlabel')) xlabels++;
                        const b = t.getBBox();
                        if (b.width === 0 || b.x < vb.x || b.x + b.width > vb.x + vb.width
                            || b.y < vb.y || b.y + b.height > vb.y + vb.height) {
                            out.push([svg.closest('figure').id, t.textContent, b.x, b.x + b.width, vb.width]);
                        }
                    }
                }
                return {out, xlabels};
            })()",
        )
        .await;
    (v["out"].clone(), v["xlabels"].as_i64().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_headless_chromium() {
    let (_dir, store) = sqlite_store().await;
    let store = migrated(store).await;
    seed::history(&store).await;
    seed::fleet(&store).await;
    let state = app_state(
        store,
        Metrics::new(),
        Clock::manual(T0 + 6 * DAY + 12 * HOUR),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, server::router(state)).await });
    let base = format!("http://{addr}");

    let browser = Browser::start();
    let page = Page::connect(&browser.ws_url).await;

    // Not logged in: the login form, which remembers where we were going.
    let repo_url = "/repos/acme/gitops?from=2026-11-01&to=2026-11-08&interval=day";
    page.goto(&format!("{base}{repo_url}")).await;
    let loc = page.eval("location.pathname + location.search").await;
    assert!(loc.as_str().unwrap().starts_with("/login?next="), "{loc}");
    // A wrong token is refused on the page.
    page.load(async {
        page.eval("document.getElementById('token').value = 'not-the-token-at-all'; document.getElementById('login').click(); true").await;
    })
    .await;
    let alert = page
        .eval("document.querySelector('[role=alert]')?.textContent")
        .await;
    assert!(
        alert.as_str().unwrap_or("").contains("not one of"),
        "{alert}"
    );
    page.load(async {
        page.eval(&format!(
            "document.getElementById('token').value = '{API_TOKEN}'; document.getElementById('login').click(); true"
        ))
        .await;
    })
    .await;
    let loc = page.eval("location.pathname + location.search").await;
    assert_eq!(loc, repo_url, "after login, back where we were going");

    // The repository page: charts with the seeded points, gaps shaded.
    let view = page
        .eval(
            "({title: document.querySelector('h1').textContent,
               charts: document.querySelectorAll('svg.chart').length,
               proxy: [...document.querySelectorAll('#chart-proxy circle.point')]
                   .filter(c => c.dataset.series === 'with a proxy')
                   .map(c => [c.dataset.bucket, Number(c.dataset.value), c.dataset.commit.slice(0, 1)]),
               gaps: [...document.querySelectorAll('#chart-proxy rect.gap')].map(r => r.dataset.bucket),
               lines: document.querySelectorAll('#chart-proxy path.line').length,
               width: document.querySelector('#chart-proxy svg').getBoundingClientRect().width,
               namespaces: [...document.querySelectorAll('#namespaces tbody tr td:first-child')].map(t => t.textContent),
               runs: document.querySelectorAll('#runs tbody tr').length,
               prLinks: [...document.querySelectorAll('#runs a[href*=\"/pull/\"]')].map(a => a.getAttribute('href')),
               headline: document.querySelector('#headline .card b').textContent,
               planes: Object.fromEntries([...document.querySelectorAll('#chart-dataplanes ul.legend li')]
                   .map(l => [l.textContent, [...document.querySelectorAll('#chart-dataplanes circle.point')]
                       .filter(c => c.dataset.series === l.textContent).map(c => Number(c.dataset.value))])),
               planesDrawn: [...document.querySelectorAll('#chart-dataplanes path.line')].map(p => p.getBBox().width > 0),
               authz: Object.fromEntries(['as written', 'reduced to L4 by ztunnel', 'not enforced'].map(k => [k,
                   [...document.querySelectorAll('#chart-authz circle.point')]
                       .filter(c => c.dataset.series === k).map(c => Number(c.dataset.value))])),
               ambientCard: document.querySelector('#card-ambient')?.textContent.replace(/\\s+/g, ' ').trim()})",
        )
        .await;
    assert_eq!(view["title"], "acme/gitops");
    assert_eq!(view["charts"], 8);
    // Workloads by data plane on days 0, 1 and 4 (the seed's table), each a line the
    // browser draws; policies by enforcement.
    assert_eq!(
        view["planes"],
        json!({
            "sidecar": [2, 5, 7],
            "ambient (L4 only)": [0, 1, 0],
            "ambient with a waypoint": [0, 0, 1],
            "none": [4, 0, 0]
        }),
        "{view:#}"
    );
    assert_eq!(view["planesDrawn"], json!([true, true, true, true]));
    assert_eq!(
        view["authz"],
        json!({"as written": [2, 1, 3], "reduced to L4 by ztunnel": [0, 1, 0], "not enforced": [0, 0, 1]}),
        "{view:#}"
    );
    let card = view["ambientCard"].as_str().unwrap_or_default();
    assert!(
        card.starts_with("workloads in ambient") && card.ends_with("1 of 8, 1 with a waypoint"),
        "{card}"
    );
    assert_eq!(
        view["proxy"],
        json!([
            ["2026-11-01", 2, "a"],
            ["2026-11-02", 5, "c"],
            ["2026-11-05", 7, "e"]
        ]),
        "{view:#}"
    );
    assert_eq!(
        view["gaps"],
        json!(["2026-11-03", "2026-11-04", "2026-11-06", "2026-11-07"])
    );
    assert!(view["lines"].as_i64().unwrap() >= 2);
    assert!(
        view["width"].as_f64().unwrap() > 300.0,
        "the chart is drawn at size"
    );
    assert_eq!(view["namespaces"], json!(["new", "pay", "shop"]));
    assert_eq!(view["runs"], 8);
    assert_eq!(
        view["prLinks"],
        json!([
            "https://github.com/acme/gitops/pull/8",
            "https://github.com/acme/gitops/pull/7",
            "https://github.com/acme/gitops/pull/7"
        ])
    );
    assert_eq!(view["headline"], "88 %", "7 of 8 workloads with a proxy");
    assert_eq!(labels_outside(&page).await.0, json!([]));
    let shot = page.screenshot("dashboard-repo.png").await;
    eprintln!("screenshot: {}", shot.display());

    // A run's page, from the runs table: the PR that took a proxy away.
    page.load(async {
        page.eval("document.querySelector('#runs tbody tr a').click(); true")
            .await;
    })
    .await;
    let run = page
        .eval("({title: document.querySelector('h1').textContent, findings: document.querySelectorAll('#findings tbody tr').length})")
        .await;
    assert!(run["title"].as_str().unwrap().contains("PR #8"), "{run}");
    assert_eq!(run["findings"], 2);
    let rows = page
        .eval("Object.fromEntries([...document.querySelectorAll('#coverage tbody tr')].map(r => [r.cells[0].textContent, r.cells[2].textContent]))")
        .await;
    assert_eq!(
        (
            &rows["workloads ambient"],
            &rows["workloads behind a waypoint"],
            &rows["authz: not enforced"]
        ),
        (&json!("1"), &json!("1"), &json!("1")),
        "the run's coverage shows its data planes: {rows:#}"
    );
    page.goto(&format!("{base}{repo_url}")).await;

    // Drill down into a namespace by its link.
    page.load(async {
        page.eval(
            "document.querySelector('#namespaces a[href*=\"namespace=shop\"]').click(); true",
        )
        .await;
    })
    .await;
    let ns = page
        .eval(
            "({title: document.querySelector('h1').textContent,
               search: location.search,
               strict: [...document.querySelectorAll('#chart-mtls circle.point')]
                   .filter(c => c.dataset.series === 'STRICT').map(c => Number(c.dataset.value))})",
        )
        .await;
    assert_eq!(ns["title"], "acme/gitops · shop");
    assert!(
        ns["search"].as_str().unwrap().contains("from=2026-11-01"),
        "the range is kept: {ns}"
    );
    assert_eq!(ns["strict"], json!([0, 1, 1]));
    page.screenshot("dashboard-namespace.png").await;

    // A repository deploying to two clusters: a line per cluster, each named in the
    // legend and linked; over a month, so the axis has a label at each end.
    page.goto(&format!(
        "{base}/repos/acme/fleet?from=2026-11-01&to=2026-12-01&interval=day"
    ))
    .await;
    let fleet = page
        .eval(
            "({legend: [...document.querySelectorAll('#chart-clusters-proxy ul.legend li')].map(l => l.textContent),
               series: Object.fromEntries(['prod-eu', 'prod-us'].map(c => [c,
                   [...document.querySelectorAll('#chart-clusters-proxy circle.point')]
                       .filter(p => p.dataset.series === c)
                       .map(p => [p.dataset.bucket, Number(p.dataset.value)])])),
               links: [...document.querySelectorAll('#clusters a')].map(a => a.textContent),
               charts: document.querySelectorAll('svg.chart').length,
               whole: [...document.querySelectorAll('#chart-proxy circle.point')]
                   .filter(c => c.dataset.series === 'with a proxy').map(c => Number(c.dataset.value))})",
        )
        .await;
    assert_eq!(fleet["legend"], json!(["prod-eu", "prod-us"]), "{fleet:#}");
    assert_eq!(
        fleet["series"],
        json!({"prod-eu": [["2026-11-02", 5], ["2026-11-03", 7]],
               "prod-us": [["2026-11-02", 1], ["2026-11-03", 3]]}),
        "{fleet:#}"
    );
    assert_eq!(
        fleet["links"],
        json!(["all (the whole repository)", "prod-eu", "prod-us"])
    );
    assert_eq!(
        fleet["charts"], 11,
        "8 of the whole repository, 3 by cluster"
    );
    assert_eq!(fleet["whole"], json!([2, 6, 10]));
    let outside = labels_outside(&page).await;
    assert_eq!(outside.0, json!([]), "labels cut off: {outside:?}");
    assert_eq!(
        outside.1,
        11 * 3,
        "first, middle and last date under each chart"
    );
    page.screenshot("dashboard-clusters.png").await;

    // One cluster's page, from its link.
    page.load(async {
        page.eval("document.querySelector('#clusters a[data-cluster=\"prod-us\"]').click(); true")
            .await;
    })
    .await;
    let us = page
        .eval(
            "({title: document.querySelector('h1').textContent,
               search: location.search,
               on: document.querySelector('#clusters a.on').textContent,
               proxy: [...document.querySelectorAll('#chart-proxy circle.point')]
                   .filter(c => c.dataset.series === 'with a proxy').map(c => Number(c.dataset.value)),
               namespaces: [...document.querySelectorAll('#namespaces tbody tr td:first-child')].map(t => t.textContent)})",
        )
        .await;
    assert_eq!(us["title"], "acme/fleet · cluster prod-us");
    assert!(
        us["search"].as_str().unwrap().contains("from=2026-11-01"),
        "{us}"
    );
    assert_eq!(us["on"], "prod-us");
    assert_eq!(us["proxy"], json!([1, 3]));
    assert_eq!(us["namespaces"], json!(["shop", "web"]));
    assert_eq!(labels_outside(&page).await.0, json!([]));

    // The repositories list.
    page.goto(&format!("{base}/")).await;
    let repos = page
        .eval("[...document.querySelectorAll('#repos tbody tr')].map(r => r.textContent.replace(/\\s+/g, ' ').trim())")
        .await;
    let repos: Vec<String> = serde_json::from_value(repos).unwrap();
    assert_eq!(repos.len(), 3);
    assert!(
        repos[0].starts_with("acme/empty") && repos[0].contains("no baseline"),
        "{repos:?}"
    );
    assert!(
        repos[1].starts_with("acme/fleet") && repos[1].contains("83 %"),
        "the whole fleet, 10 of 12 workloads: {repos:?}"
    );
    assert!(
        repos[2].starts_with("acme/gitops") && repos[2].contains("88 %"),
        "{repos:?}"
    );
    page.screenshot("dashboard-repos.png").await;

    let errors = page.errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    drop(browser);
}
