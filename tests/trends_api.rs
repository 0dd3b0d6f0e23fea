//! The trends API on seeded history, on PostgreSQL and on SQLite: bucketing, gaps,
//! the namespace filter, paging, errors, auth, the OpenAPI document (every answer
//! is checked against it), /metrics gauges and retention.

use crate::service_support;

use meshward::clock::Clock;
use meshward::metrics::Metrics;
use meshward::server;
use meshward::store::*;
use serde_json::Value;
use service_support::seed::{self, DAY, HOUR, T0};
use service_support::*;

fn get(path: &str, token: Option<&str>) -> http::Request<axum::body::Body> {
    let mut b = http::Request::builder().method("GET").uri(path);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    b.body(axum::body::Body::empty()).expect("request")
}

struct Api {
    app: axum::Router,
    openapi: Value,
}

impl Api {
    async fn new(store: Store) -> Api {
        // "Now" is 2026-11-30T12:00:00Z: relative ranges are tested against it.
        let state = app_state(
            store,
            Metrics::new(),
            Clock::manual(T0 + 29 * DAY + 12 * HOUR),
        );
        let app = server::router(state);
        let (status, body) = send(&app, get("/api/v1/openapi.json", None)).await;
        assert_eq!(status, 200, "the OpenAPI document needs no token");
        let api = Api {
            app,
            openapi: serde_json::from_str(&body).expect("openapi json"),
        };
        // The schema check is not vacuous: a wrong shape fails it.
        let bad = serde_json::json!({"repos": [{"repo": 1, "installed": true}]});
        assert!(
            !api.schema_errors(&bad, "RepoList").is_empty(),
            "a wrong shape must not conform"
        );
        api
    }

    /// GETs `path` with the test token; checks the answer against the OpenAPI schema
    /// for its status (`schema` names the 200 schema).
    async fn get(&self, path: &str, schema: &str) -> (u16, Value) {
        let (status, body) = send(&self.app, get(path, Some(API_TOKEN))).await;
        let json: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {body}"));
        let schema = if status == 200 { schema } else { "Error" };
        self.conforms(&json, schema);
        (status, json)
    }

    fn conforms(&self, json: &Value, schema: &str) {
        let errors = self.schema_errors(json, schema);
        assert!(
            errors.is_empty(),
            "does not match {schema}: {errors:#?}\n{json:#}"
        );
    }

    fn schema_errors(&self, json: &Value, schema: &str) -> Vec<String> {
        let root = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": format!("#/components/schemas/{schema}"),
            "components": self.openapi["components"],
        });
        let validator = jsonschema::validator_for(&root).expect("schema compiles");
        validator
            .iter_errors(json)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect()
    }
}

fn commits(series: &Value) -> Vec<Option<String>> {
    series["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| p["run"]["commit"].as_str().map(|c| c[..1].to_string()))
        .collect()
}

fn metric(series: &Value, key: &str) -> Vec<Option<i64>> {
    series["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| p["metrics"][key].as_i64())
        .collect()
}

async fn daily_series_takes_the_last_baseline_of_each_day_and_marks_gaps(store: Store) {
    let store = migrated(store).await;
    seed::history(&store).await;
    let api = Api::new(store).await;
    let (status, s) = api
        .get(
            "/api/v1/repos/acme/gitops/coverage?from=2026-11-01&to=2026-11-08&interval=day",
            "Series",
        )
        .await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["from"], "2026-11-01T00:00:00Z");
    assert_eq!(s["to"], "2026-11-08T00:00:00Z");
    assert_eq!(s["points"].as_array().unwrap().len(), 7);
    // Day 1 had two baselines: the later one (c) is the day's point.
    let c = |s: &str| Some(s.to_string());
    assert_eq!(
        commits(&s),
        vec![c("a"), c("c"), None, c("d"), c("e"), None, None]
    );
    assert_eq!(
        metric(&s, "workloads_with_proxy"),
        vec![Some(2), Some(5), None, None, Some(7), None, None]
    );
    assert_eq!(
        metric(&s, "namespaces_strict"),
        vec![Some(0), Some(1), None, None, Some(2), None, None]
    );
    assert_eq!(
        metric(&s, "namespaces_permissive"),
        vec![Some(2), Some(1), None, None, Some(1), None, None]
    );
    // Data planes and enforcement (the seed's ambient): day 1 pay has an ambient
    // workload without a waypoint (its policy reduced to L4), day 4 new one behind a
    // waypoint and a policy nothing enforces.
    for (key, want) in [
        ("workloads_ambient", [0, 1, 1]),
        ("workloads_waypoint", [0, 0, 1]),
        ("namespaces_ambient", [0, 1, 1]),
        ("authz_as_written", [2, 1, 3]),
        ("authz_reduced_to_l4", [0, 1, 0]),
        ("authz_not_enforced", [0, 0, 1]),
    ] {
        assert_eq!(
            metric(&s, key),
            vec![
                Some(want[0]),
                Some(want[1]),
                None,
                None,
                Some(want[2]),
                None,
                None
            ],
            "{key}"
        );
    }
    let p = &s["points"];
    assert_eq!(p[1]["baselines"], 2);
    assert_eq!(p[1]["run"]["finished_at"], "2026-11-02T15:00:00Z");
    assert_eq!(p[1]["metrics"]["findings"]["error"], 2);
    assert_eq!(p[0]["metrics"]["findings"]["error"], 3);
    assert!(p[2]["gap"]
        .as_str()
        .unwrap()
        .contains("no baseline run finished"));
    // An errored baseline is a gap that says why, with its commit.
    let gap = p[3]["gap"].as_str().unwrap();
    assert!(
        gap.contains("failed") && gap.contains("tarball over the limit"),
        "{gap}"
    );
    assert_eq!(p[3]["run"]["outcome"], "error");
    assert!(p[3]["metrics"].is_null());
    assert!(p[0]["gap"].is_null());
}

async fn hourly_and_weekly_buckets_align_in_utc(store: Store) {
    let store = migrated(store).await;
    seed::history(&store).await;
    let api = Api::new(store).await;
    let (_, s) = api
        .get(
            "/api/v1/repos/acme/gitops/coverage?from=2026-11-02T08:30:00Z&to=2026-11-02T16:00:00Z&interval=hour",
            "Series",
        )
        .await;
    assert_eq!(s["from"], "2026-11-02T08:00:00Z");
    let c = |s: &str| Some(s.to_string());
    // 08..16h: b finished at 09:00 (bucket 09), c at 15:00 (bucket 15).
    assert_eq!(
        commits(&s),
        vec![None, c("b"), None, None, None, None, None, c("c")]
    );
    // Weeks start on Monday: 2026-11-01 is a Sunday, so it is in the week of Oct 26.
    let (_, w) = api
        .get(
            "/api/v1/repos/acme/gitops/coverage?from=2026-11-01&to=2026-11-10&interval=week",
            "Series",
        )
        .await;
    assert_eq!(w["from"], "2026-10-26T00:00:00Z");
    assert_eq!(w["to"], "2026-11-16T00:00:00Z");
    assert_eq!(commits(&w), vec![c("a"), c("e"), None]);
    // Relative times: the last 30 days from "now" (2026-11-30 12:00).
    let (_, r) = api
        .get("/api/v1/repos/acme/gitops/coverage?from=30d", "Series")
        .await;
    assert_eq!(r["from"], "2026-10-31T00:00:00Z");
    assert_eq!(r["points"].as_array().unwrap().len(), 31);
}

async fn namespace_filter_follows_one_namespace(store: Store) {
    let store = migrated(store).await;
    seed::history(&store).await;
    let api = Api::new(store).await;
    let (status, s) = api
        .get(
            "/api/v1/repos/acme/gitops/coverage?from=2026-11-01&to=2026-11-06&namespace=new",
            "Series",
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(s["namespace"], "new");
    // "new" only exists from day 4 on: before, the runs are there but it is not.
    let gap = s["points"][0]["gap"].as_str().unwrap();
    assert!(
        gap.contains("namespace new is not in commit aaaaaaaaaaaa"),
        "{gap}"
    );
    assert_eq!(s["points"][0]["run"]["commit"], seed::sha('a'));
    let day4 = &s["points"][4]["metrics"];
    assert_eq!(day4["workloads"], 1);
    assert_eq!(day4["mtls_mode"], "PERMISSIVE");
    assert_eq!(day4["namespaces_permissive"], 1);
    assert!(day4["namespaces_injected"].is_null());
    assert_eq!(day4["findings"]["error"], 1);
    assert_eq!(
        (
            &day4["workloads_ambient"],
            &day4["workloads_waypoint"],
            &day4["authz_not_enforced"]
        ),
        (&1.into(), &1.into(), &1.into())
    );
    assert!(
        day4["namespaces_ambient"].is_null(),
        "recorded for the whole repository only"
    );

    let (_, shop) = api
        .get(
            "/api/v1/repos/acme/gitops/coverage?from=2026-11-01&to=2026-11-06&namespace=shop",
            "Series",
        )
        .await;
    assert_eq!(
        metric(&shop, "workloads_with_proxy"),
        vec![Some(2), Some(4), None, None, Some(5)]
    );
    let modes: Vec<Option<&str>> = shop["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metrics"]["mtls_mode"].as_str())
        .collect();
    assert_eq!(
        modes,
        vec![
            Some("PERMISSIVE"),
            Some("STRICT"),
            None,
            None,
            Some("STRICT")
        ]
    );
    assert_eq!(shop["points"][1]["metrics"]["findings"]["error"], 1);
    assert_eq!(shop["points"][4]["metrics"]["findings"]["error"], 0);
}

fn strings(v: &Value) -> Vec<Option<String>> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|s| s.as_str().map(str::to_string))
        .collect()
}

fn gaps(series: &Value) -> Vec<Option<String>> {
    strings(
        &series["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["gap"].clone())
            .collect(),
    )
}

async fn clusters_have_series_of_their_own(store: Store) {
    let store = migrated(store).await;
    seed::history(&store).await;
    seed::fleet(&store).await;
    let api = Api::new(store).await;
    let base = "/api/v1/repos/acme/fleet/coverage?from=2026-11-01&to=2026-11-04";

    // The whole repository, as without clusters; the clusters it has series for.
    let (status, s) = api.get(base, "Series").await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["clusters"], serde_json::json!(["prod-eu", "prod-us"]));
    assert!(s["cluster"].is_null());
    assert_eq!(metric(&s, "workloads"), vec![Some(4), Some(9), Some(12)]);
    assert_eq!(
        metric(&s, "workloads_with_proxy"),
        vec![Some(2), Some(6), Some(10)]
    );
    assert_eq!(s["points"][1]["metrics"]["findings"]["error"], 3);
    assert_eq!(s["points"][1]["metrics"]["findings"]["warning"], 1);
    // Day 2: prod-us's web is ambient, one of its two workloads behind a waypoint.
    assert_eq!(
        metric(&s, "workloads_ambient"),
        vec![Some(0), Some(0), Some(2)]
    );
    assert_eq!(
        metric(&s, "authz_reduced_to_l4"),
        vec![Some(0), Some(0), Some(1)]
    );

    // One cluster: its numbers and the findings naming it; before the repository
    // named clusters, a gap that says so.
    let (status, eu) = api.get(&format!("{base}&cluster=prod-eu"), "Series").await;
    assert_eq!(status, 200, "{eu}");
    assert_eq!(eu["cluster"], "prod-eu");
    assert_eq!(eu["clusters"], s["clusters"]);
    assert_eq!(metric(&eu, "workloads"), vec![None, Some(6), Some(7)]);
    assert_eq!(
        metric(&eu, "namespaces_strict"),
        vec![None, Some(1), Some(2)]
    );
    assert_eq!(
        gaps(&eu)[0].as_deref(),
        Some("cluster prod-eu is not in commit ffffffffffff")
    );
    assert_eq!(eu["points"][0]["run"]["commit"], seed::sha('f'));
    let errors: Vec<Value> = eu["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metrics"]["findings"]["error"].clone())
        .collect();
    assert_eq!(errors, [Value::Null, 1.into(), 0.into()]);
    assert_eq!(
        eu["points"][1]["metrics"]["findings"]["warning"], 0,
        "the file no cluster is named for"
    );

    // A namespace in one cluster, and added up over the clusters that have it.
    let (_, us) = api.get(&format!("{base}&cluster=prod-us"), "Series").await;
    assert_eq!(
        metric(&us, "workloads_waypoint"),
        vec![None, Some(0), Some(1)]
    );
    assert_eq!(
        metric(&us, "namespaces_ambient"),
        vec![None, Some(0), Some(1)]
    );
    assert_eq!(
        metric(&eu, "workloads_ambient"),
        vec![None, Some(0), Some(0)]
    );
    let (_, us_shop) = api
        .get(&format!("{base}&cluster=prod-us&namespace=shop"), "Series")
        .await;
    assert_eq!(
        (&us_shop["cluster"], &us_shop["namespace"]),
        (&"prod-us".into(), &"shop".into())
    );
    assert_eq!(
        metric(&us_shop, "workloads_with_proxy"),
        vec![None, Some(1), Some(3)]
    );
    assert_eq!(
        gaps(&us_shop)[0].as_deref(),
        Some("namespace shop is not in cluster prod-us in commit ffffffffffff")
    );
    let modes: Vec<Value> = us_shop["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metrics"]["mtls_mode"].clone())
        .collect();
    assert_eq!(modes, [Value::Null, "PERMISSIVE".into(), "STRICT".into()]);
    let (_, shop) = api.get(&format!("{base}&namespace=shop"), "Series").await;
    assert!(shop["cluster"].is_null());
    assert_eq!(metric(&shop, "workloads"), vec![Some(4), Some(7), Some(8)]);
    assert_eq!(metric(&shop, "namespaces"), vec![Some(1), Some(2), Some(2)]);
    let p1 = &shop["points"][1]["metrics"];
    assert!(
        p1["mtls_mode"].is_null(),
        "STRICT in one cluster, PERMISSIVE in the other"
    );
    assert_eq!(
        (&p1["namespaces_strict"], &p1["namespaces_permissive"]),
        (&1.into(), &1.into())
    );
    assert_eq!(p1["findings"]["error"], 2);
    assert_eq!(shop["points"][2]["metrics"]["mtls_mode"], "STRICT");

    // A repository with one cluster lists none; a cluster no run names is refused
    // with the ones there are, a malformed name as a bad parameter.
    let (_, one) = api
        .get(
            "/api/v1/repos/acme/gitops/coverage?from=2026-11-01&to=2026-11-02",
            "Series",
        )
        .await;
    assert_eq!(one["clusters"], serde_json::json!([]));
    let long = "x".repeat(300);
    for (path, want, text) in [
        (format!("{base}&cluster=prod-ap"), 404, "cluster: no run of acme/fleet names a cluster `prod-ap`; its clusters: prod-eu, prod-us".to_string()),
        ("/api/v1/repos/acme/gitops/coverage?cluster=prod-eu".into(), 404, "its runs name none".into()),
        (format!("{base}&cluster=%20prod-eu"), 400, "cluster: ` prod-eu` is not a cluster name".into()),
        (format!("{base}&cluster=prod%0Aeu"), 400, "cluster: `prod?eu` is not a cluster name".into()),
        (format!("{base}&cluster={long}"), 400, "at most 253 characters".into()),
    ] {
        let (status, body) = api.get(&path, "Error").await;
        assert_eq!(status, want, "{path}: {body}");
        let msg = body["error"].as_str().unwrap();
        assert!(msg.contains(&text), "{path}: {msg:?} does not contain {text:?}");
    }

    // The runs list and the gauges read the whole repository, not each cluster again.
    let (_, pr) = api
        .get("/api/v1/repos/acme/fleet/runs?pr=3", "RunPage")
        .await;
    let r = &pr["runs"][0];
    assert_eq!(
        (
            &r["coverage"]["head"]["workloads"],
            &r["coverage"]["base"]["workloads"]
        ),
        (&12.into(), &9.into())
    );
    assert_eq!(r["delta"]["workloads_with_proxy"], 4);
    let (_, text) = send(&api.app, get("/metrics", None)).await;
    assert!(
        text.contains("meshward_coverage_workloads{repo=\"acme/fleet\"} 12"),
        "{text}"
    );

    // The PR's page: each cluster's coverage with the change, the findings' clusters.
    let id = r["id"].as_i64().unwrap();
    let (status, html) = send(
        &api.app,
        get(&format!("/repos/acme/fleet/runs/{id}"), Some(API_TOKEN)),
    )
    .await;
    assert_eq!(status, 200, "{html}");
    for row in [
        "<tr><td>prod-eu</td><td class=\"num\">7 / 7</td><td class=\"num\">0 (0)</td><td class=\"num\">2 / 2</td>",
        "<tr><td>prod-us</td><td class=\"num\">3 / 5</td><td class=\"num\">2 (1)</td><td class=\"num\">1 / 2</td>",
    ] {
        assert!(html.contains(row), "{row}: {html}");
    }
    let clusters = &html[html
        .find("<table id=\"clusters\">")
        .expect("clusters table")..];
    let clusters = &clusters[..clusters.find("</table>").unwrap()];
    assert_eq!(
        clusters.matches("<td class=\"num\">+2</td>").count(),
        2,
        "{clusters}"
    );
    let findings = &html[html.find("<table id=\"findings\">").expect("findings")..];
    assert!(findings.contains("<th>cluster</th>"));
    assert!(findings.contains("<td>prod-us</td>"), "{findings}");
    // The repository page of one cluster, and one no run names.
    let (status, html) = send(
        &api.app,
        get(
            "/repos/acme/fleet?from=2026-11-01&to=2026-11-04&cluster=prod-eu",
            Some(API_TOKEN),
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert!(html.contains("<h1>acme/fleet · cluster prod-eu</h1>"));
    let (status, html) = send(
        &api.app,
        get("/repos/acme/fleet?cluster=prod-ap", Some(API_TOKEN)),
    )
    .await;
    assert_eq!(status, 404);
    assert!(html.contains("its clusters: prod-eu, prod-us"), "{html}");
}

async fn runs_are_cursor_paged_and_pr_runs_carry_their_delta(store: Store) {
    let store = migrated(store).await;
    seed::history(&store).await;
    let api = Api::new(store).await;
    let mut ids = Vec::new();
    let mut path = "/api/v1/repos/acme/gitops/runs?limit=3".to_string();
    let mut pages = 0;
    loop {
        let (status, page) = api.get(&path, "RunPage").await;
        assert_eq!(status, 200, "{page}");
        pages += 1;
        let runs = page["runs"].as_array().unwrap();
        assert!(runs.len() <= 3);
        ids.extend(runs.iter().map(|r| r["id"].as_i64().unwrap()));
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/api/v1/repos/acme/gitops/runs?limit=3&cursor={c}"),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(ids.len(), 8, "every run once");
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");

    let (_, pr7) = api
        .get("/api/v1/repos/acme/gitops/runs?pr=7", "RunPage")
        .await;
    let runs = pr7["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(pr7["next_cursor"].is_null());
    let older = &runs[1];
    assert_eq!(older["kind"], "check");
    assert_eq!(older["pr"], 7);
    assert_eq!(older["pr_url"], "https://github.com/acme/gitops/pull/7");
    // Day 1: shop went STRICT and got a proxy on one more workload, pay one too.
    assert_eq!(older["delta"]["namespaces_strict"], 1);
    assert_eq!(older["delta"]["workloads_with_proxy"], 2);
    assert_eq!(older["delta"]["workloads"], 0);
    assert_eq!(older["findings"]["resolved"], 1);
    // ... and of pay's two ambient workloads one now has a sidecar.
    assert_eq!(older["delta"]["workloads_ambient"], -1);
    // The later run of PR 7: new's workload arrives behind a waypoint, pay's policy
    // is enforced as written again, new's is not enforced at all.
    let later = &runs[0]["delta"];
    assert_eq!(
        (
            &later["workloads_waypoint"],
            &later["authz_reduced_to_l4"],
            &later["authz_not_enforced"]
        ),
        (&1.into(), &(-1).into(), &1.into())
    );
    assert_eq!(older["outcome"], "pass");
    // PR 8 takes a proxy away and introduces a finding: it fails.
    let (_, pr8) = api
        .get("/api/v1/repos/acme/gitops/runs?pr=8", "RunPage")
        .await;
    let r = &pr8["runs"][0];
    assert_eq!(r["delta"]["workloads_with_proxy"], -1);
    assert_eq!(r["findings"]["introduced"], 1);
    assert_eq!(r["outcome"], "fail");
    assert_eq!(r["blocking"], 1);

    let (_, baselines) = api
        .get(
            "/api/v1/repos/acme/gitops/runs?kind=baseline&limit=100",
            "RunPage",
        )
        .await;
    let b = baselines["runs"].as_array().unwrap();
    assert_eq!(b.len(), 5);
    assert!(b.iter().all(|r| r["delta"].is_null() && r["pr"].is_null()));
    assert_eq!(b[1]["outcome"], "error");
    assert!(b[1]["coverage"]["head"].is_null());
}

async fn bad_requests_name_the_parameter(store: Store) {
    let store = migrated(store).await;
    seed::history(&store).await;
    let api = Api::new(store).await;
    let cases = [
        (
            "/api/v1/repos/acme/gitops/coverage?interval=month",
            400,
            "interval: `month` is not an interval",
        ),
        (
            "/api/v1/repos/acme/gitops/coverage?from=yesterday",
            400,
            "from: `yesterday` is not a time",
        ),
        (
            "/api/v1/repos/acme/gitops/coverage?from=2026-12-01&to=2026-11-01",
            400,
            "is not before to",
        ),
        (
            "/api/v1/repos/acme/gitops/coverage?from=5000d&interval=hour",
            400,
            "at most 5000",
        ),
        (
            "/api/v1/repos/acme/gitops/coverage?namespace=Not_A_Namespace",
            400,
            "namespace: `Not_A_Namespace`",
        ),
        (
            "/api/v1/repos/acme/gitops/coverage?since=1d",
            400,
            "unknown parameter `since`",
        ),
        (
            "/api/v1/repos/acme/gitops/runs?limit=1000",
            400,
            "limit: 1000 is over the maximum of 100",
        ),
        (
            "/api/v1/repos/acme/gitops/runs?limit=-1",
            400,
            "limit: `-1` is not a positive whole number",
        ),
        (
            "/api/v1/repos/acme/gitops/runs?cursor=abc",
            400,
            "cursor: not a cursor this API returned",
        ),
        (
            "/api/v1/repos/acme/gitops/runs?kind=push",
            400,
            "kind: `push` is not a run kind",
        ),
        (
            "/api/v1/repos/acme/nothing/coverage",
            404,
            "no history for acme/nothing",
        ),
        (
            "/api/v1/repos/acme/nothing/runs",
            404,
            "no history for acme/nothing",
        ),
    ];
    for (path, want, text) in cases {
        let (status, body) = api.get(path, "Error").await;
        assert_eq!(status, want, "{path}: {body}");
        let msg = body["error"].as_str().unwrap();
        assert!(
            msg.contains(text),
            "{path}: {msg:?} does not contain {text:?}"
        );
    }
    // A repository known but without baselines: a series of gaps, not an error.
    let (status, s) = api
        .get(
            "/api/v1/repos/acme/empty/coverage?from=2026-11-01&to=2026-11-03",
            "Series",
        )
        .await;
    assert_eq!(status, 200);
    assert!(s["points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["metrics"].is_null()));
    // Names are matched as GitHub does, without regard to case.
    let (status, s) = api
        .get(
            "/api/v1/repos/ACME/GitOps/coverage?from=2026-11-01&to=2026-11-02",
            "Series",
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(s["repo"], "acme/gitops");
}

async fn the_api_refuses_requests_without_a_valid_token(store: Store) {
    let store = migrated(store).await;
    seed::history(&store).await;
    let api = Api::new(store.clone()).await;
    for path in [
        "/api/v1/repos",
        "/api/v1/repos/acme/gitops/coverage",
        "/api/v1/repos/acme/gitops/runs",
    ] {
        let (status, body) = send(&api.app, get(path, None)).await;
        assert_eq!(status, 401, "{path}: {body}");
        assert!(body.contains("Authorization: Bearer"), "{body}");
        assert!(
            !body.contains("gitops\""),
            "no data without a token: {body}"
        );
        let (status, _) = send(&api.app, get(path, Some("test-api-token-wrong-one"))).await;
        assert_eq!(status, 401, "{path} with a wrong token");
    }
    let resp = {
        use tower::ServiceExt;
        api.app
            .clone()
            .oneshot(get("/api/v1/repos", None))
            .await
            .unwrap()
    };
    assert_eq!(
        resp.headers()["www-authenticate"],
        "Bearer realm=\"meshward\""
    );
    // The dashboard sends the browser to the login form instead.
    let resp = {
        use tower::ServiceExt;
        api.app
            .clone()
            .oneshot(get("/repos/acme/gitops?interval=week", None))
            .await
            .unwrap()
    };
    assert_eq!(resp.status(), 303);
    assert_eq!(
        resp.headers()["location"],
        "/login?next=%2Frepos%2Facme%2Fgitops%3Finterval%3Dweek"
    );

    // Without any configured token, the API is off (403), and says so.
    let mut state = app_state(store, Metrics::new(), Clock::manual(T0));
    state.api.tokens = Default::default();
    let off = server::router(state);
    let (status, body) = send(&off, get("/api/v1/repos", Some(API_TOKEN))).await;
    assert_eq!(status, 403);
    assert!(
        body.contains("no MESHWARD_API_TOKENS are configured"),
        "{body}"
    );
    // The webhook does not use API tokens: a signed delivery is taken without one.
    let ping = serde_json::to_vec(&payload("ping")).unwrap();
    let (status, _) = send(&off, webhook_request("ping", "d-ping", &ping, Some(SECRET))).await;
    assert_eq!(status, 204);
}

async fn repos_list_and_metrics_show_the_latest_baseline(store: Store) {
    let store = migrated(store).await;
    seed::history(&store).await;
    let api = Api::new(store).await;
    let (status, body) = api.get("/api/v1/repos", "RepoList").await;
    assert_eq!(status, 200);
    let repos = body["repos"].as_array().unwrap();
    assert_eq!(repos.len(), 2);
    assert_eq!(repos[0]["repo"], "acme/empty");
    assert!(repos[0]["latest"].is_null());
    let latest = &repos[1]["latest"];
    assert_eq!(latest["commit"], seed::sha('e'));
    assert_eq!(latest["metrics"]["workloads"], 8);
    assert_eq!(latest["metrics"]["namespaces_strict"], 2);

    let (status, text) = send(&api.app, get("/metrics", None)).await;
    assert_eq!(status, 200);
    for line in [
        "meshward_coverage_workloads{repo=\"acme/gitops\"} 8",
        "meshward_coverage_workloads_with_proxy{repo=\"acme/gitops\"} 7",
        "meshward_coverage_namespaces_strict{repo=\"acme/gitops\"} 2",
        "meshward_coverage_namespaces_permissive{repo=\"acme/gitops\"} 1",
        "meshward_coverage_selectors_ineffective{repo=\"acme/gitops\"} 1",
        "meshward_coverage_workloads_ambient{repo=\"acme/gitops\"} 1",
        "meshward_coverage_workloads_waypoint{repo=\"acme/gitops\"} 1",
        "meshward_coverage_namespaces_ambient{repo=\"acme/gitops\"} 1",
        "meshward_coverage_authz_not_enforced{repo=\"acme/gitops\"} 1",
        "meshward_coverage_findings{repo=\"acme/gitops\",severity=\"error\"} 1",
        "meshward_coverage_timestamp_seconds{repo=\"acme/gitops\"} 1793865600",
    ] {
        assert!(text.contains(line), "/metrics lacks {line:?}:\n{text}");
    }
    assert!(
        !text.contains("repo=\"acme/empty\""),
        "no gauges without a baseline"
    );
}

async fn retention_deletes_old_pr_runs_and_keeps_baselines(store: Store) {
    let store = migrated(store).await;
    seed::history(&store).await;
    let before = store.runs(&RunFilter::default()).await.unwrap();
    let old_check = before
        .iter()
        .find(|r| r.kind == JobKind::Check && r.finished_at_ms < T0 + 2 * DAY)
        .unwrap()
        .id;
    assert!(!store.findings(old_check).await.unwrap().is_empty());
    // Everything finished before day 3 is old: one PR run, three baselines.
    let deleted = store.prune_check_runs(T0 + 3 * DAY).await.unwrap();
    assert_eq!(deleted, 1);
    let after = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(after.len(), before.len() - 1);
    assert!(after.iter().all(|r| r.id != old_check));
    assert_eq!(
        after.iter().filter(|r| r.kind == JobKind::Baseline).count(),
        5,
        "baselines are kept, however old"
    );
    assert!(
        store.findings(old_check).await.unwrap().is_empty(),
        "findings go with the run"
    );
    assert!(
        store.coverage(old_check).await.unwrap().is_empty(),
        "coverage goes with the run"
    );
    assert_eq!(store.prune_check_runs(T0 + 3 * DAY).await.unwrap(), 0);

    // The service's loop: with a 20-day retention on 2026-11-26, the two PR runs of
    // 2026-11-05 go; it counts them and stops when the service does.
    let metrics = Metrics::new();
    let stop = tokio_util::sync::CancellationToken::new();
    stop.cancel();
    meshward::service::retention_loop(
        store.clone(),
        metrics.clone(),
        Clock::manual(T0 + 25 * DAY),
        std::time::Duration::from_secs(20 * 86_400),
        std::time::Duration::from_secs(3600),
        stop,
    )
    .await;
    assert_eq!(metrics.runs_pruned.get(), 2);
    let left = store.runs(&RunFilter::default()).await.unwrap();
    assert!(
        left.iter().all(|r| r.kind == JobKind::Baseline),
        "{left:#?}"
    );
}

async fn dashboard_login_sets_a_session_that_opens_pages_and_the_api(store: Store) {
    use tower::ServiceExt;
    let store = migrated(store).await;
    seed::history(&store).await;
    let api = Api::new(store).await;
    let login = |token: &str, next: &str| {
        let body = serde_urlencoded::to_string([("token", token), ("next", next)]).unwrap();
        http::Request::builder()
            .method("POST")
            .uri("/login")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(axum::body::Body::from(body))
            .unwrap()
    };
    // A wrong token: the form again, with the reason, and no cookie.
    let resp = api
        .app
        .clone()
        .oneshot(login("wrong-token-0123456789", "/"))
        .await
        .unwrap();
    assert!(resp.headers().get("set-cookie").is_none());
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&body).contains("not one of this server"));
    // The right one: a session cookie, and back to `next` (only paths of this site).
    let resp = api
        .app
        .clone()
        .oneshot(login(API_TOKEN, "//evil.example/x"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 303);
    assert_eq!(resp.headers()["location"], "/", "no redirect off the site");
    let cookie = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains(API_TOKEN), "the cookie is not the token");
    let session = cookie.split(';').next().unwrap().to_string();
    let with_session = |path: &str| {
        http::Request::get(path)
            .header("cookie", session.clone())
            .body(axum::body::Body::empty())
            .unwrap()
    };
    let (status, html) = send(&api.app, with_session("/")).await;
    assert_eq!(status, 200);
    assert!(html.contains("acme/gitops") && html.contains("acme/empty"));
    let (status, html) = send(
        &api.app,
        with_session("/repos/acme/gitops?from=2026-11-01&to=2026-11-08"),
    )
    .await;
    assert_eq!(status, 200);
    assert!(html.contains("class=\"point\""), "the charts have points");
    let (status, html) = send(&api.app, with_session("/repos/acme/nothing")).await;
    assert_eq!(status, 404);
    assert!(html.contains("no history for acme/nothing"));
    let (status, html) = send(&api.app, with_session("/repos/acme/gitops?interval=month")).await;
    assert_eq!(status, 400);
    assert!(html.contains("interval: `month` is not an interval"));
    // A run's page (check runs link to it): PR 8 is the newest run.
    let (_, page) = api
        .get("/api/v1/repos/acme/gitops/runs?pr=8", "RunPage")
        .await;
    let id = page["runs"][0]["id"].as_i64().unwrap();
    let (status, html) = send(
        &api.app,
        with_session(&format!("/repos/acme/gitops/runs/{id}")),
    )
    .await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains(&format!("Run {id} · PR #8")), "{html}");
    assert!(
        html.contains("selector/matches-nothing") && html.contains("apps/shop/policy-0.yaml:7")
    );
    assert!(
        html.contains("<td class=\"num\">-1</td>"),
        "the change in proxies: {html}"
    );
    let (status, html) = send(&api.app, with_session("/repos/acme/gitops/runs/999")).await;
    assert_eq!(status, 404);
    assert!(html.contains("no run 999 of acme/gitops"));
    let (status, _) = send(
        &api.app,
        with_session("/repos/acme/gitops/runs/9223372036854775807"),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = send(&api.app, with_session("/repos/acme/gitops/runs/x")).await;
    assert_eq!(status, 400);
    // The session also opens the API (the dashboard's own pages could call it).
    let (status, _) = send(&api.app, with_session("/api/v1/repos")).await;
    assert_eq!(status, 200);
    let resp = api.app.clone().oneshot(with_session("/")).await.unwrap();
    let csp = resp.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    // A tampered session is refused.
    let tampered = session.replacen('.', ".0", 1);
    let req = http::Request::get("/api/v1/repos")
        .header("cookie", tampered)
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(send(&api.app, req).await.0, 401);
}

contract!(
    clusters_have_series_of_their_own,
    dashboard_login_sets_a_session_that_opens_pages_and_the_api,
    daily_series_takes_the_last_baseline_of_each_day_and_marks_gaps,
    hourly_and_weekly_buckets_align_in_utc,
    namespace_filter_follows_one_namespace,
    runs_are_cursor_paged_and_pr_runs_carry_their_delta,
    bad_requests_name_the_parameter,
    the_api_refuses_requests_without_a_valid_token,
    repos_list_and_metrics_show_the_latest_baseline,
    retention_deletes_old_pr_runs_and_keeps_baselines,
);
