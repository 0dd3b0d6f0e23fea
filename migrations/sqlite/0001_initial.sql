-- meshward history store, version 1 (SQLite; keep in step with ../postgres).
-- Times are milliseconds since the Unix epoch (BIGINT), the same in both backends.

CREATE TABLE repos (
    github_id       BIGINT PRIMARY KEY,
    full_name       TEXT NOT NULL,
    installation_id BIGINT,
    default_branch  TEXT,
    installed       BOOLEAN NOT NULL DEFAULT 1,
    updated_at_ms   BIGINT NOT NULL
);
CREATE INDEX repos_full_name ON repos (full_name);
CREATE INDEX repos_installation ON repos (installation_id);

CREATE TABLE deliveries (
    delivery_id    TEXT PRIMARY KEY,
    event          TEXT NOT NULL,
    action         TEXT,
    repo           TEXT,
    outcome        TEXT NOT NULL,
    received_at_ms BIGINT NOT NULL
);

CREATE TABLE jobs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT NOT NULL CHECK (kind IN ('check', 'baseline')),
    repo_id         BIGINT NOT NULL,
    repo            TEXT NOT NULL,
    installation_id BIGINT,
    pr_number       BIGINT,
    head_sha        TEXT NOT NULL,
    base_sha        TEXT,
    base_ref        TEXT,
    delivery_id     TEXT,
    state           TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'superseded')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    max_attempts    BIGINT NOT NULL,
    run_after_ms    BIGINT NOT NULL,
    locked_by       TEXT,
    locked_until_ms BIGINT,
    last_error      TEXT,
    superseded_by   BIGINT,
    created_at_ms   BIGINT NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    finished_at_ms  BIGINT
);
CREATE INDEX jobs_claimable ON jobs (state, run_after_ms, id);
CREATE INDEX jobs_pr ON jobs (repo_id, pr_number, state);

CREATE TABLE runs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id         BIGINT UNIQUE REFERENCES jobs (id) ON DELETE SET NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('check', 'baseline')),
    repo_id        BIGINT NOT NULL,
    repo           TEXT NOT NULL,
    pr_number      BIGINT,
    head_sha       TEXT NOT NULL,
    base_sha       TEXT,
    started_at_ms  BIGINT NOT NULL,
    finished_at_ms BIGINT NOT NULL,
    outcome        TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'error')),
    error          TEXT,
    blocking       BIGINT NOT NULL DEFAULT 0,
    introduced     BIGINT NOT NULL DEFAULT 0,
    existing       BIGINT NOT NULL DEFAULT 0,
    resolved       BIGINT NOT NULL DEFAULT 0,
    errors         BIGINT NOT NULL DEFAULT 0,
    warnings       BIGINT NOT NULL DEFAULT 0,
    infos          BIGINT NOT NULL DEFAULT 0,
    suppressed     BIGINT NOT NULL DEFAULT 0,
    report_json    TEXT
);
CREATE INDEX runs_repo_kind ON runs (repo_id, kind, finished_at_ms);
CREATE INDEX runs_pr ON runs (repo_id, pr_number);

CREATE TABLE findings (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id               BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    rule                 TEXT NOT NULL,
    severity             TEXT NOT NULL,
    status               TEXT NOT NULL,
    resource_api_version TEXT,
    resource_kind        TEXT,
    resource_namespace   TEXT,
    resource_name        TEXT,
    file                 TEXT NOT NULL,
    line                 BIGINT NOT NULL,
    message              TEXT NOT NULL,
    istio_code           TEXT,
    field_path           TEXT NOT NULL
);
CREATE INDEX findings_run ON findings (run_id);
CREATE INDEX findings_rule ON findings (rule);

CREATE TABLE coverage_totals (
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
    PRIMARY KEY (run_id, revision)
);

CREATE TABLE coverage_namespaces (
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
    PRIMARY KEY (run_id, revision, namespace)
);
