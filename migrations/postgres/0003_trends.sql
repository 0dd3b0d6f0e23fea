-- meshward history store, version 3: coverage trends (PostgreSQL; keep in step with the
-- other folder). Self-contained: touches only runs, findings and the coverage tables.

-- Namespaces by effective mTLS mode, in total (STRICT was already counted).
ALTER TABLE coverage_totals ADD COLUMN namespaces_permissive BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_totals ADD COLUMN namespaces_disable BIGINT NOT NULL DEFAULT 0;
UPDATE coverage_totals SET
    namespaces_permissive = (SELECT COUNT(*) FROM coverage_namespaces n
        WHERE n.run_id = coverage_totals.run_id AND n.revision = coverage_totals.revision
          AND n.mtls_mode = 'PERMISSIVE'),
    namespaces_disable = (SELECT COUNT(*) FROM coverage_namespaces n
        WHERE n.run_id = coverage_totals.run_id AND n.revision = coverage_totals.revision
          AND n.mtls_mode = 'DISABLE');

-- Findings per run and namespace, as the run totals count them: by severity (findings
-- not resolved) and by status. A Namespace object's findings count in that namespace;
-- findings about cluster-scoped objects or whole files only count in the run's totals.
CREATE TABLE namespace_findings (
    run_id     BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    namespace  TEXT NOT NULL,
    errors     BIGINT NOT NULL,
    warnings   BIGINT NOT NULL,
    infos      BIGINT NOT NULL,
    introduced BIGINT NOT NULL,
    existing   BIGINT NOT NULL,
    resolved   BIGINT NOT NULL,
    PRIMARY KEY (run_id, namespace)
);
INSERT INTO namespace_findings (run_id, namespace, errors, warnings, infos, introduced, existing, resolved)
SELECT run_id, ns,
       SUM(CASE WHEN status <> 'resolved' AND severity = 'error' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status <> 'resolved' AND severity = 'warning' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status <> 'resolved' AND severity = 'info' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 'introduced' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 'existing' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 'resolved' THEN 1 ELSE 0 END)
FROM (SELECT run_id, severity, status,
             CASE WHEN resource_kind = 'Namespace' AND resource_namespace IS NULL
                  THEN resource_name ELSE resource_namespace END AS ns
      FROM findings) f
WHERE ns IS NOT NULL
GROUP BY run_id, ns;

-- The runs list of a repository (newest first, optionally one PR), cursor-paged by id.
CREATE INDEX runs_repo_recent ON runs (repo_id, id);
CREATE INDEX runs_repo_pr_recent ON runs (repo_id, pr_number, id);
-- A repository looked up by name when the repos table does not know it.
CREATE INDEX runs_repo_name ON runs (repo, id);
-- Retention: old PR runs by age.
CREATE INDEX runs_kind_finished ON runs (kind, finished_at_ms);
