//! Migrations, on both backends: all apply to an empty database, and later ones apply
//! over data written by earlier versions without losing it.
//!
//! When a migration is added: write the seed data of the version before it (or of
//! the new one) as SQL that both backends accept, and add it to `SEEDS`.

use meshward::store::*;

/// Rows as version 1 of the schema holds them. Portable SQL: no explicit ids (the
/// PostgreSQL sequences must stay right), references through subqueries.
const SEED_V1: &str = r#"
INSERT INTO repos (github_id, full_name, installation_id, default_branch, installed, updated_at_ms)
VALUES (1001, 'acme/gitops', 77, 'main', TRUE, 100),
       (1002, 'acme/old', 77, 'main', FALSE, 100);

INSERT INTO deliveries (delivery_id, event, action, repo, outcome, received_at_ms)
VALUES ('seed-delivery-1', 'pull_request', 'opened', 'acme/gitops', 'enqueued', 100);

INSERT INTO jobs (kind, repo_id, repo, installation_id, pr_number, head_sha, base_sha, base_ref,
                  delivery_id, state, attempts, max_attempts, run_after_ms, created_at_ms, updated_at_ms)
VALUES ('check', 1001, 'acme/gitops', 77, 7, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
        'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb', 'main', 'seed-delivery-1', 'queued', 0, 5, 100, 100, 100),
       ('baseline', 1001, 'acme/gitops', 77, NULL, 'cccccccccccccccccccccccccccccccccccccccc',
        NULL, 'main', NULL, 'succeeded', 1, 5, 100, 100, 200);

INSERT INTO runs (job_id, kind, repo_id, repo, pr_number, head_sha, base_sha, started_at_ms, finished_at_ms,
                  outcome, error, blocking, introduced, existing, resolved, errors, warnings, infos, suppressed, report_json)
VALUES ((SELECT id FROM jobs WHERE kind = 'baseline'), 'baseline', 1001, 'acme/gitops', NULL,
        'cccccccccccccccccccccccccccccccccccccccc', NULL, 150, 200, 'fail', NULL, 1, 0, 1, 0, 1, 0, 0, 0, NULL);

INSERT INTO findings (run_id, rule, severity, status, resource_api_version, resource_kind, resource_namespace,
                      resource_name, file, line, message, istio_code, field_path)
VALUES ((SELECT id FROM runs WHERE head_sha = 'cccccccccccccccccccccccccccccccccccccccc'),
        'serviceentry/none-with-endpoints', 'error', 'existing', 'networking.istio.io/v1', 'ServiceEntry',
        'egress', 'payments-api', 'clusters/prod/payments.yaml', 12, 'resolution NONE with endpoints', NULL,
        '["spec","resolution"]');

INSERT INTO coverage_totals (run_id, revision, namespaces, namespaces_strict, namespaces_injected, workloads,
                             workloads_with_proxy, selectors_effective, selectors_ineffective,
                             workload_entries_selected, workload_entries_total)
VALUES ((SELECT id FROM runs WHERE head_sha = 'cccccccccccccccccccccccccccccccccccccccc'), 'head',
        1, 0, 1, 3, 2, 1, 1, 0, 0);

INSERT INTO coverage_namespaces (run_id, revision, namespace, mtls_mode, workloads, workloads_with_proxy,
                                 selectors_effective, selectors_ineffective, workload_entries_selected,
                                 workload_entries_total)
VALUES ((SELECT id FROM runs WHERE head_sha = 'cccccccccccccccccccccccccccccccccccccccc'), 'head',
        'egress', 'PERMISSIVE', 3, 2, 1, 1, 0, 0);
"#;

/// Version 2: what was posted on pull request 7.
const SEED_V2: &str = r#"
INSERT INTO publications (job_id, repo_id, pr_number, head_sha, run_id, plan_json, check_run_id, check_state,
                          annotations_sent, comment_id, review_id, state, error, created_at_ms, updated_at_ms,
                          published_at_ms)
VALUES ((SELECT id FROM jobs WHERE kind = 'check'), 1001, 7, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', NULL, NULL,
        555, 'in_progress', 0, NULL, NULL, 'started', NULL, 300, 300, NULL);

INSERT INTO pr_comments (repo_id, pr_number, comment_id, job_id, head_sha, updated_at_ms)
VALUES (1001, 7, 901, (SELECT id FROM jobs WHERE kind = 'check'), 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 300);

INSERT INTO review_comments (repo_id, pr_number, finding_key, path, rule, subject, line, comment_id, review_id,
                             job_id, head_sha, posted_at_ms, resolved_at_ms, reply_id)
VALUES (1001, 7, '00112233445566778899', 'clusters/prod/payments.yaml', 'serviceentry/none-with-endpoints',
        'ServiceEntry/egress/payments-api', 12, 902, 903, (SELECT id FROM jobs WHERE kind = 'check'),
        'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 300, NULL, NULL);
"#;

/// Rows as version 3 holds them: a later baseline with the mTLS mode counts and
/// per-namespace findings version 3 added.
const SEED_V3: &str = r#"
INSERT INTO runs (job_id, kind, repo_id, repo, pr_number, head_sha, base_sha, started_at_ms, finished_at_ms,
                  outcome, error, blocking, introduced, existing, resolved, errors, warnings, infos, suppressed, report_json)
VALUES (NULL, 'baseline', 1001, 'acme/gitops', NULL, 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee', NULL, 250, 300,
        'pass', NULL, 0, 0, 0, 0, 0, 1, 0, 0, NULL);

INSERT INTO coverage_totals (run_id, revision, namespaces, namespaces_strict, namespaces_injected, workloads,
                             workloads_with_proxy, selectors_effective, selectors_ineffective,
                             workload_entries_selected, workload_entries_total, namespaces_permissive,
                             namespaces_disable)
VALUES ((SELECT id FROM runs WHERE head_sha = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee'), 'head',
        2, 1, 2, 5, 5, 2, 0, 1, 1, 0, 1);

INSERT INTO coverage_namespaces (run_id, revision, namespace, mtls_mode, workloads, workloads_with_proxy,
                                 selectors_effective, selectors_ineffective, workload_entries_selected,
                                 workload_entries_total)
VALUES ((SELECT id FROM runs WHERE head_sha = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee'), 'head',
        'egress', 'STRICT', 3, 3, 1, 0, 1, 1),
       ((SELECT id FROM runs WHERE head_sha = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee'), 'head',
        'legacy', 'DISABLE', 2, 2, 1, 0, 0, 0);

INSERT INTO namespace_findings (run_id, namespace, errors, warnings, infos, introduced, existing, resolved)
VALUES ((SELECT id FROM runs WHERE head_sha = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee'), 'legacy',
        0, 1, 0, 0, 1, 0);
"#;

/// (schema version, rows written at that version), oldest first.
const SEEDS: &[(i64, &str)] = &[
    (1, SEED_V1),
    (2, SEED_V2),
    (3, SEED_V3),
    (4, SEED_V4),
    (5, SEED_V5),
    (6, SEED_V6),
    (7, SEED_V7),
];

/// Version 7 adds route destinations by whether they reach pods: a later baseline of
/// the fleet with 5 reaching, 2 going nowhere and 1 not checked, 2/1/0 of them in shop.
const SEED_V7: &str = r#"
INSERT INTO runs (job_id, kind, repo_id, repo, pr_number, head_sha, base_sha, started_at_ms, finished_at_ms,
                  outcome, error, blocking, introduced, existing, resolved, errors, warnings, infos, suppressed, report_json)
VALUES (NULL, 'baseline', 1003, 'acme/fleet', NULL, '7777777777777777777777777777777777777777', NULL, 2450, 2500,
        'pass', NULL, 0, 0, 0, 0, 0, 0, 0, 0, NULL);

INSERT INTO coverage_totals (run_id, revision, cluster, namespaces, namespaces_strict, namespaces_injected, workloads,
                             workloads_with_proxy, selectors_effective, selectors_ineffective,
                             workload_entries_selected, workload_entries_total, namespaces_permissive,
                             namespaces_disable, namespaces_ambient, workloads_ambient, workloads_waypoint,
                             authz_as_written, authz_reduced_to_l4, authz_not_enforced,
                             routes_resolving, routes_nowhere, routes_unchecked)
VALUES ((SELECT id FROM runs WHERE head_sha = '7777777777777777777777777777777777777777'), 'head', '',
        1, 0, 0, 4, 4, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 2, 1);

INSERT INTO coverage_namespaces (run_id, revision, cluster, namespace, mtls_mode, workloads, workloads_with_proxy,
                                 selectors_effective, selectors_ineffective, workload_entries_selected,
                                 workload_entries_total, workloads_ambient, workloads_waypoint, authz_as_written,
                                 authz_reduced_to_l4, authz_not_enforced, routes_resolving, routes_nowhere,
                                 routes_unchecked)
VALUES ((SELECT id FROM runs WHERE head_sha = '7777777777777777777777777777777777777777'), 'head', '',
        'shop', 'PERMISSIVE', 4, 4, 2, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0);
"#;

/// Version 6 adds workloads by data plane and AuthorizationPolicies by enforcement: a
/// later baseline of the fleet with ambient workloads, one policy reduced to L4 and
/// one not enforced, in total and in its namespace; and plaintext bytes in evidence.
const SEED_V6: &str = r#"
INSERT INTO runs (job_id, kind, repo_id, repo, pr_number, head_sha, base_sha, started_at_ms, finished_at_ms,
                  outcome, error, blocking, introduced, existing, resolved, errors, warnings, infos, suppressed, report_json)
VALUES (NULL, 'baseline', 1003, 'acme/fleet', NULL, '6666666666666666666666666666666666666666', NULL, 1450, 1500,
        'pass', NULL, 0, 0, 0, 0, 0, 0, 0, 0, NULL);

INSERT INTO coverage_totals (run_id, revision, cluster, namespaces, namespaces_strict, namespaces_injected, workloads,
                             workloads_with_proxy, selectors_effective, selectors_ineffective,
                             workload_entries_selected, workload_entries_total, namespaces_permissive,
                             namespaces_disable, namespaces_ambient, workloads_ambient, workloads_waypoint,
                             authz_as_written, authz_reduced_to_l4, authz_not_enforced)
VALUES ((SELECT id FROM runs WHERE head_sha = '6666666666666666666666666666666666666666'), 'head', '',
        1, 0, 0, 4, 1, 2, 0, 0, 0, 1, 0, 1, 3, 1, 1, 1, 1);

INSERT INTO coverage_namespaces (run_id, revision, cluster, namespace, mtls_mode, workloads, workloads_with_proxy,
                                 selectors_effective, selectors_ineffective, workload_entries_selected,
                                 workload_entries_total, workloads_ambient, workloads_waypoint, authz_as_written,
                                 authz_reduced_to_l4, authz_not_enforced)
VALUES ((SELECT id FROM runs WHERE head_sha = '6666666666666666666666666666666666666666'), 'head', '',
        'shop', 'PERMISSIVE', 4, 1, 2, 0, 0, 0, 3, 1, 1, 1, 1);

INSERT INTO evidence (run_id, subject, source, time_window, taken_at_ms, requests_total, requests_plaintext,
                      tcp_connections_total, tcp_connections_plaintext, tcp_bytes_plaintext, queries, workloads, error)
VALUES ((SELECT id FROM runs WHERE head_sha = '6666666666666666666666666666666666666666'), 'namespace:shop',
        'prometheus https://prometheus.internal', '1h', 1500, 0, 0, 60, 0, 2048, '{}', '[]', NULL);
"#;

/// Version 5 adds the cluster dimension: a baseline of a repository deploying to two
/// clusters, its whole-repository row and each cluster's under one run and revision
/// (the new primary keys), a finding naming its cluster.
const SEED_V5: &str = r#"
INSERT INTO runs (job_id, kind, repo_id, repo, pr_number, head_sha, base_sha, started_at_ms, finished_at_ms,
                  outcome, error, blocking, introduced, existing, resolved, errors, warnings, infos, suppressed, report_json)
VALUES (NULL, 'baseline', 1003, 'acme/fleet', NULL, 'ffffffffffffffffffffffffffffffffffffffff', NULL, 350, 400,
        'fail', NULL, 1, 0, 1, 0, 1, 0, 0, 0, NULL);

INSERT INTO findings (run_id, rule, severity, status, resource_api_version, resource_kind, resource_namespace,
                      resource_name, file, line, message, istio_code, field_path, cluster)
VALUES ((SELECT id FROM runs WHERE head_sha = 'ffffffffffffffffffffffffffffffffffffffff'),
        'selector/matches-nothing', 'error', 'existing', 'security.istio.io/v1', 'AuthorizationPolicy', 'shop',
        'frontend-only', 'clusters/prod-eu/policy.yaml', 3, 'selects nothing', NULL, '["spec","selector"]',
        'prod-eu');

INSERT INTO coverage_totals (run_id, revision, cluster, namespaces, namespaces_strict, namespaces_injected, workloads,
                             workloads_with_proxy, selectors_effective, selectors_ineffective,
                             workload_entries_selected, workload_entries_total, namespaces_permissive,
                             namespaces_disable)
VALUES ((SELECT id FROM runs WHERE head_sha = 'ffffffffffffffffffffffffffffffffffffffff'), 'head', '',
        2, 1, 2, 5, 4, 0, 1, 0, 0, 1, 0),
       ((SELECT id FROM runs WHERE head_sha = 'ffffffffffffffffffffffffffffffffffffffff'), 'head', 'prod-eu',
        1, 1, 1, 3, 3, 0, 1, 0, 0, 0, 0),
       ((SELECT id FROM runs WHERE head_sha = 'ffffffffffffffffffffffffffffffffffffffff'), 'head', 'prod-us',
        1, 0, 1, 2, 1, 0, 0, 0, 0, 1, 0);

INSERT INTO coverage_namespaces (run_id, revision, cluster, namespace, mtls_mode, workloads, workloads_with_proxy,
                                 selectors_effective, selectors_ineffective, workload_entries_selected,
                                 workload_entries_total)
VALUES ((SELECT id FROM runs WHERE head_sha = 'ffffffffffffffffffffffffffffffffffffffff'), 'head', 'prod-eu',
        'shop', 'STRICT', 3, 3, 0, 1, 0, 0),
       ((SELECT id FROM runs WHERE head_sha = 'ffffffffffffffffffffffffffffffffffffffff'), 'head', 'prod-us',
        'shop', 'PERMISSIVE', 2, 1, 0, 0, 0, 0);

INSERT INTO namespace_findings (run_id, cluster, namespace, errors, warnings, infos, introduced, existing, resolved)
VALUES ((SELECT id FROM runs WHERE head_sha = 'ffffffffffffffffffffffffffffffffffffffff'), 'prod-eu', 'shop',
        1, 0, 0, 0, 1, 0);

INSERT INTO repo_clusters (repo_id, cluster) VALUES (1003, 'prod-eu'), (1003, 'prod-us');
"#;

/// Version 4 adds `evidence`: a run with the numbers its mTLS rules were judged on.
const SEED_V4: &str = r#"
INSERT INTO evidence (run_id, subject, source, time_window, taken_at_ms, requests_total, requests_plaintext,
                      tcp_connections_total, tcp_connections_plaintext, queries, workloads, error)
VALUES ((SELECT id FROM runs WHERE head_sha = 'cccccccccccccccccccccccccccccccccccccccc'), 'namespace:egress',
        'prometheus https://prometheus.internal', '7d', 150, 600, 0, 60, 0,
        '{"requests_plaintext":"sum(increase(istio_requests_total{reporter=\"destination\",destination_workload_namespace=\"egress\",connection_security_policy!=\"mutual_tls\"}[7d]))"}',
        '[]', NULL);
"#;

async fn all_migrations_apply_to_an_empty_database(store: Store) {
    assert_eq!(
        SEEDS.last().map(|s| s.0),
        Some(Store::latest_migration(store.backend())),
        "add seed data for the newest migration to SEEDS"
    );
    store.migrate().await.unwrap();
    assert_eq!(
        store.applied_migration().await.unwrap(),
        Store::latest_migration(store.backend())
    );
    store.ready().await.unwrap();
    assert!(store.jobs().await.unwrap().is_empty());
    assert!(store.repos().await.unwrap().is_empty());
}

async fn later_migrations_apply_over_seed_data(store: Store) {
    for (version, seed) in SEEDS {
        store.migrate_to(Some(*version)).await.unwrap();
        assert_eq!(store.applied_migration().await.unwrap(), *version);
        store.execute_script(seed).await.unwrap();
    }
    // Everything after the last seeded version (with one version: re-applied, a
    // no-op that must not touch the data).
    store.migrate().await.unwrap();
    store.ready().await.unwrap();

    // The seed data reads back through the current store API...
    let repos = store.repos().await.unwrap();
    assert_eq!(repos.len(), 2);
    assert_eq!(repos[0].full_name, "acme/gitops");
    assert!(repos[0].installed && !repos[1].installed);
    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 5);
    assert_eq!(runs[0].outcome, RunOutcome::Fail);
    assert_eq!(runs[0].counts.existing, 1);
    let findings = store.findings(runs[0].id).await.unwrap();
    assert_eq!(findings[0].rule, "serviceentry/none-with-endpoints");
    assert_eq!(findings[0].line, 12);
    let coverage = store.coverage(runs[0].id).await.unwrap();
    assert_eq!(coverage[0].total.workloads, 3);
    assert_eq!(coverage[0].namespaces[0].mtls_mode, "PERMISSIVE");
    // Version 5: every row written before it is the whole repository's.
    assert_eq!(findings[0].cluster, None);
    assert_eq!(coverage.len(), 1);
    assert_eq!(coverage[0].cluster, None);
    assert_eq!(coverage[0].namespaces[0].namespace, "egress");
    // Version 6: rows written before it count nothing by data plane or enforcement.
    let t = &coverage[0].total;
    assert_eq!(
        (
            t.namespaces_ambient,
            t.workloads_ambient,
            t.workloads_waypoint,
            t.authz_as_written,
            t.authz_reduced_to_l4,
            t.authz_not_enforced
        ),
        (0, 0, 0, 0, 0, 0)
    );
    assert_eq!(coverage[0].namespaces[0].workloads_ambient, 0);
    assert!(store.clusters(1001).await.unwrap().is_empty());
    let evidence = store.evidence(runs[0].id).await.unwrap();
    assert_eq!(evidence.len(), 1);
    assert_eq!(evidence[0].subject, "namespace:egress");
    assert_eq!(
        (evidence[0].requests_total, evidence[0].requests_plaintext),
        (600, 0)
    );
    // Asked for from version 6 on: evidence stored before holds 0.
    assert_eq!(evidence[0].tcp_bytes_plaintext, 0);
    assert!(evidence[0].queries["requests_plaintext"]
        .contains("destination_workload_namespace=\"egress\""));

    // Version 3 filled in what version 1 data lacked: the mTLS mode counts from the
    // namespaces, the findings per namespace from the findings.
    let series = store
        .series(&SeriesQuery {
            repo_id: 1001,
            start_ms: 0,
            end_ms: 1_000,
            bucket_ms: 100,
            offset_ms: 0,
            cluster: None,
            namespace: None,
        })
        .await
        .unwrap();
    assert_eq!(series.len(), 2, "{series:#?}");
    let v1 = series[0].metrics.as_ref().expect("v1 run metrics");
    assert_eq!(series[0].head_sha, "c".repeat(40));
    assert_eq!(v1.coverage.namespaces_permissive, 1);
    assert_eq!(v1.coverage.namespaces_disable, 0);
    assert_eq!(v1.findings.error, 1);
    assert_eq!(
        (
            v1.coverage.workloads_ambient,
            v1.coverage.namespaces_ambient,
            v1.coverage.authz_not_enforced
        ),
        (0, Some(0), 0)
    );
    let egress = store.namespace_metrics(runs[0].id).await.unwrap();
    assert_eq!(egress.len(), 1);
    assert_eq!(
        (egress[0].cluster.as_deref(), egress[0].namespace.as_str()),
        (None, "egress")
    );
    assert_eq!(egress[0].metrics.findings.error, 1);
    assert_eq!(egress[0].metrics.findings.existing, 1);
    // The namespace's series (added up over clusters: here the one, '') as before.
    let egress_series = store
        .series(&SeriesQuery {
            repo_id: 1001,
            start_ms: 0,
            end_ms: 1_000,
            bucket_ms: 100,
            offset_ms: 0,
            cluster: None,
            namespace: Some("egress"),
        })
        .await
        .unwrap();
    let m = egress_series[0]
        .metrics
        .as_ref()
        .expect("egress in the v1 run");
    assert_eq!((m.coverage.namespaces, m.coverage.workloads), (1, 3));
    assert_eq!(m.coverage.mtls_mode.as_deref(), Some("PERMISSIVE"));
    assert_eq!(m.findings.error, 1);
    // The version 3 seed reads back as written.
    let v3 = series[1].metrics.as_ref().expect("v3 run metrics");
    assert_eq!(series[1].head_sha, "e".repeat(40));
    assert_eq!(
        (
            v3.coverage.namespaces_strict,
            v3.coverage.namespaces_disable
        ),
        (1, 1)
    );
    let legacy = store.namespace_metrics(runs[1].id).await.unwrap();
    assert_eq!(legacy[1].namespace, "legacy");
    assert_eq!(
        legacy[1].metrics.coverage.mtls_mode.as_deref(),
        Some("DISABLE")
    );
    assert_eq!(legacy[1].metrics.findings.warning, 1);
    // The version 5 seed: the whole repository and each cluster, read back apart.
    assert_eq!(store.clusters(1003).await.unwrap(), ["prod-eu", "prod-us"]);
    let fleet = store.coverage(runs[2].id).await.unwrap();
    let scopes: Vec<Option<&str>> = fleet.iter().map(|c| c.cluster.as_deref()).collect();
    assert_eq!(scopes, [None, Some("prod-eu"), Some("prod-us")]);
    assert_eq!(fleet[0].total.workloads, 5);
    let fleet_query = |cluster| SeriesQuery {
        repo_id: 1003,
        start_ms: 0,
        end_ms: 1_000,
        bucket_ms: 1_000,
        offset_ms: 0,
        cluster,
        namespace: None,
    };
    let whole = store.series(&fleet_query(None)).await.unwrap();
    let us = store.series(&fleet_query(Some("prod-us"))).await.unwrap();
    let eu = store.series(&fleet_query(Some("prod-eu"))).await.unwrap();
    let workloads = |s: &[BucketRow]| s[0].metrics.as_ref().map(|m| m.coverage.workloads);
    assert_eq!(
        (workloads(&whole), workloads(&eu), workloads(&us)),
        (Some(5), Some(3), Some(2))
    );
    assert_eq!(eu[0].metrics.as_ref().unwrap().findings.error, 1);
    assert_eq!(us[0].metrics.as_ref().unwrap().findings.error, 0);
    assert_eq!(
        store.findings(runs[2].id).await.unwrap()[0]
            .cluster
            .as_deref(),
        Some("prod-eu")
    );
    // The version 6 seed: data planes and enforcement, in total, per namespace and
    // in the series.
    let v6 = store.coverage(runs[3].id).await.unwrap();
    let t = &v6[0].total;
    assert_eq!(
        (
            t.namespaces_ambient,
            t.workloads_ambient,
            t.workloads_waypoint,
            t.authz_as_written,
            t.authz_reduced_to_l4,
            t.authz_not_enforced
        ),
        (1, 3, 1, 1, 1, 1)
    );
    let evidence = store.evidence(runs[3].id).await.unwrap();
    assert_eq!(
        evidence
            .iter()
            .map(|e| (e.subject.as_str(), e.tcp_bytes_plaintext))
            .collect::<Vec<_>>(),
        vec![("namespace:shop", 2048)]
    );
    let shop = &store.namespace_metrics(runs[3].id).await.unwrap()[0];
    assert_eq!(
        (
            shop.metrics.coverage.workloads_ambient,
            shop.metrics.coverage.workloads_waypoint,
            shop.metrics.coverage.authz_reduced_to_l4
        ),
        (3, 1, 1)
    );
    let later = store
        .series(&SeriesQuery {
            start_ms: 1_000,
            end_ms: 2_000,
            ..fleet_query(None)
        })
        .await
        .unwrap();
    let m = later[0].metrics.as_ref().expect("v6 run metrics");
    assert_eq!(
        (m.coverage.workloads_ambient, m.coverage.authz_not_enforced),
        (3, 1)
    );
    // Version 7: rows written before it count no routes; the version 7 seed reads back.
    assert_eq!(
        (t.routes_resolving, t.routes_nowhere, t.routes_unchecked),
        (0, 0, 0)
    );
    let v7 = store.coverage(runs[4].id).await.unwrap();
    let t = &v7[0].total;
    assert_eq!(
        (t.routes_resolving, t.routes_nowhere, t.routes_unchecked),
        (5, 2, 1)
    );
    let shop = &store.namespace_metrics(runs[4].id).await.unwrap()[0];
    assert_eq!(
        (
            shop.metrics.coverage.routes_resolving,
            shop.metrics.coverage.routes_nowhere
        ),
        (2, 1)
    );
    let latest = store
        .series(&SeriesQuery {
            start_ms: 2_000,
            end_ms: 3_000,
            ..fleet_query(None)
        })
        .await
        .unwrap();
    let m = latest[0].metrics.as_ref().expect("v7 run metrics");
    assert_eq!(
        (m.coverage.routes_resolving, m.coverage.routes_nowhere),
        (5, 2)
    );
    let overview = store.repo_overview().await.unwrap();
    assert_eq!(
        overview[0].latest.as_ref().map(|l| l.run_id),
        Some(runs[1].id)
    );

    // ... and the store keeps working on it: the seeded job is claimable, the seeded
    // delivery is still a duplicate, new rows get fresh ids.
    let claimed = store.claim("w", 1_000, 60_000).await.unwrap().unwrap();
    assert_eq!(claimed.pr_number, Some(7));
    assert_eq!(claimed.delivery_id.as_deref(), Some("seed-delivery-1"));
    let delivery = NewDelivery {
        delivery_id: "seed-delivery-1".into(),
        event: "pull_request".into(),
        action: None,
        repo: None,
        outcome: "enqueued".into(),
    };
    assert_eq!(
        store
            .record_delivery(&delivery, &DeliveryEffect::default(), 3, 2_000)
            .await
            .unwrap(),
        DeliveryOutcome::Duplicate
    );
    let new = crate::service_support::check_job(8, &"b".repeat(40), &"d".repeat(40));
    let id = store.enqueue(&new, 3, 3_000).await.unwrap().id();
    assert!(id > claimed.id);
    assert_eq!(store.jobs().await.unwrap().len(), 3);

    // What was posted reads back, and re-runs keep building on it.
    let pubs = store.publications(1001, 7).await.unwrap();
    assert_eq!(pubs.len(), 1);
    assert_eq!(pubs[0].job_id, claimed.id);
    assert_eq!(
        (pubs[0].check_run_id, pubs[0].check_state.as_deref()),
        (Some(555), Some("in_progress"))
    );
    let again = store.start_publication(&claimed, 7, 4_000).await.unwrap();
    assert_eq!(again, pubs[0], "an existing publication is kept");
    store
        .set_check_state(claimed.id, "completed", 4_000)
        .await
        .unwrap();
    store
        .finish_publication(claimed.id, None, 4_000)
        .await
        .unwrap();
    let done = store.publication(claimed.id).await.unwrap().unwrap();
    assert_eq!(
        (done.state.as_str(), done.published_at_ms),
        ("published", Some(4_000))
    );
    assert_eq!(store.pr_comment(1001, 7).await.unwrap(), Some(901));
    assert_eq!(
        store
            .claim_pr_comment(1001, 7, 999, claimed.id, "a", 4_000)
            .await
            .unwrap(),
        901,
        "the recorded summary comment wins"
    );
    let mut comments = store.review_comments(1001, 7).await.unwrap();
    assert_eq!(comments.len(), 1);
    assert_eq!((comments[0].comment_id, comments[0].line), (902, 12));
    let mut another = comments[0].clone();
    another.finding_key = "ffeeddccbbaa99887766".into();
    another.comment_id = 904;
    store.record_review_comment(&another).await.unwrap();
    store
        .resolve_review_comment(1001, 7, "00112233445566778899", Some(905), 4_000)
        .await
        .unwrap();
    comments = store.review_comments(1001, 7).await.unwrap();
    assert_eq!(comments.len(), 2);
    assert_eq!(comments[0].reply_id, Some(905));
    assert_eq!(comments[1].comment_id, 904);
}

contract!(
    all_migrations_apply_to_an_empty_database,
    later_migrations_apply_over_seed_data,
);
