-- meshward history store, version 5: the cluster dimension (SQLite; keep in step with
-- ../postgres). A repository that deploys to several clusters stores each cluster's
-- coverage and per-namespace findings next to the whole repository's. `cluster` is ''
-- for the whole repository (and for a repository with one cluster or none): every row
-- written before this version keeps meaning exactly that.
--
-- SQLite cannot change a primary key: the three keyed tables are rebuilt (create the
-- new table, copy, drop the old, rename), with the column last as PostgreSQL adds it.
-- None of them is referenced by another table or has an index besides its key.

-- The cluster a finding is about; '' where it names none.
ALTER TABLE findings ADD COLUMN cluster TEXT NOT NULL DEFAULT '';

-- Per run and revision: the whole repository ('') and, for several clusters, one row
-- per cluster.
CREATE TABLE coverage_totals_v5 (
    run_id                    BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    revision                  TEXT NOT NULL CHECK (revision IN ('base', 'head')),
    namespaces                BIGINT NOT NULL,
    namespaces_strict         BIGINT NOT NULL,
    namespaces_injected       BIGINT NOT NULL,
    workloads                 BIGINT NOT NULL,
    workloads_with_proxy      BIGINT NOT NULL,
    selectors_effective       BIGINT NOT NULL,
    selectors_ineffective     BIGINT NOT NULL,
    workload_entries_selected BIGINT NOT NULL,
    workload_entries_total    BIGINT NOT NULL,
    namespaces_permissive     BIGINT NOT NULL DEFAULT 0,
    namespaces_disable        BIGINT NOT NULL DEFAULT 0,
    cluster                   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, revision, cluster)
);
INSERT INTO coverage_totals_v5 (run_id, revision, namespaces, namespaces_strict, namespaces_injected, workloads,
                                workloads_with_proxy, selectors_effective, selectors_ineffective,
                                workload_entries_selected, workload_entries_total, namespaces_permissive,
                                namespaces_disable, cluster)
SELECT run_id, revision, namespaces, namespaces_strict, namespaces_injected, workloads, workloads_with_proxy,
       selectors_effective, selectors_ineffective, workload_entries_selected, workload_entries_total,
       namespaces_permissive, namespaces_disable, ''
FROM coverage_totals;
DROP TABLE coverage_totals;
ALTER TABLE coverage_totals_v5 RENAME TO coverage_totals;

-- Per run, revision and namespace: '' for a repository with one cluster; with several,
-- each cluster's namespaces (the whole repository's `cluster/namespace` keys of the
-- report are not stored: they are these rows).
CREATE TABLE coverage_namespaces_v5 (
    run_id                    BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    revision                  TEXT NOT NULL CHECK (revision IN ('base', 'head')),
    namespace                 TEXT NOT NULL,
    mtls_mode                 TEXT NOT NULL,
    workloads                 BIGINT NOT NULL,
    workloads_with_proxy      BIGINT NOT NULL,
    selectors_effective       BIGINT NOT NULL,
    selectors_ineffective     BIGINT NOT NULL,
    workload_entries_selected BIGINT NOT NULL,
    workload_entries_total    BIGINT NOT NULL,
    cluster                   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, revision, cluster, namespace)
);
INSERT INTO coverage_namespaces_v5 (run_id, revision, namespace, mtls_mode, workloads, workloads_with_proxy,
                                    selectors_effective, selectors_ineffective, workload_entries_selected,
                                    workload_entries_total, cluster)
SELECT run_id, revision, namespace, mtls_mode, workloads, workloads_with_proxy, selectors_effective,
       selectors_ineffective, workload_entries_selected, workload_entries_total, ''
FROM coverage_namespaces;
DROP TABLE coverage_namespaces;
ALTER TABLE coverage_namespaces_v5 RENAME TO coverage_namespaces;

-- Per run, cluster and namespace: findings that name no cluster count under ''.
CREATE TABLE namespace_findings_v5 (
    run_id     BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    namespace  TEXT NOT NULL,
    errors     BIGINT NOT NULL,
    warnings   BIGINT NOT NULL,
    infos      BIGINT NOT NULL,
    introduced BIGINT NOT NULL,
    existing   BIGINT NOT NULL,
    resolved   BIGINT NOT NULL,
    cluster    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, cluster, namespace)
);
INSERT INTO namespace_findings_v5 (run_id, namespace, errors, warnings, infos, introduced, existing, resolved,
                                   cluster)
SELECT run_id, namespace, errors, warnings, infos, introduced, existing, resolved, ''
FROM namespace_findings;
DROP TABLE namespace_findings;
ALTER TABLE namespace_findings_v5 RENAME TO namespace_findings;

-- The clusters each repository's runs stored coverage for, so that listing them reads
-- a few rows rather than the coverage of every run the repository has. The run insert
-- adds to it, retention removes clusters no remaining run has; no run stored one
-- before this version.
CREATE TABLE repo_clusters (
    repo_id BIGINT NOT NULL,
    cluster TEXT NOT NULL,
    PRIMARY KEY (repo_id, cluster)
);
