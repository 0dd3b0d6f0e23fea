-- meshward history store, version 5: the cluster dimension (PostgreSQL; keep in step
-- with the other folder). A repository that deploys to several clusters stores each
-- cluster's coverage and per-namespace findings next to the whole repository's.
-- `cluster` is '' for the whole repository (and for a repository with one cluster or
-- none): every row written before this version keeps meaning exactly that.

-- The cluster a finding is about; '' where it names none.
ALTER TABLE findings ADD COLUMN cluster TEXT NOT NULL DEFAULT '';

-- Per run and revision: the whole repository ('') and, for several clusters, one row
-- per cluster.
ALTER TABLE coverage_totals ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE coverage_totals DROP CONSTRAINT coverage_totals_pkey;
ALTER TABLE coverage_totals ADD PRIMARY KEY (run_id, revision, cluster);

-- Per run, revision and namespace: '' for a repository with one cluster; with several,
-- each cluster's namespaces (the whole repository's `cluster/namespace` keys of the
-- report are not stored: they are these rows).
ALTER TABLE coverage_namespaces ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE coverage_namespaces DROP CONSTRAINT coverage_namespaces_pkey;
ALTER TABLE coverage_namespaces ADD PRIMARY KEY (run_id, revision, cluster, namespace);

-- Per run, cluster and namespace: findings that name no cluster count under ''.
ALTER TABLE namespace_findings ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE namespace_findings DROP CONSTRAINT namespace_findings_pkey;
ALTER TABLE namespace_findings ADD PRIMARY KEY (run_id, cluster, namespace);

-- The clusters each repository's runs stored coverage for, so that listing them reads
-- a few rows rather than the coverage of every run the repository has. The run insert
-- adds to it, retention removes clusters no remaining run has; no run stored one
-- before this version.
CREATE TABLE repo_clusters (
    repo_id BIGINT NOT NULL,
    cluster TEXT NOT NULL,
    PRIMARY KEY (repo_id, cluster)
);
