-- meshward history store, version 2 (SQLite; keep in step with ../postgres): what
-- meshward posted on pull requests, so that re-runs (also after a restart) edit and
-- answer instead of posting again.

-- One per check job of a pull request: the check run (or commit status) and what
-- the run publishes (stored with the run, so a failed publish is retried as it was).
CREATE TABLE publications (
    job_id           BIGINT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    repo_id          BIGINT NOT NULL,
    pr_number        BIGINT NOT NULL,
    head_sha         TEXT NOT NULL,
    run_id           BIGINT REFERENCES runs (id) ON DELETE SET NULL,
    plan_json        TEXT,
    check_run_id     BIGINT,
    -- App mode: 'in_progress' or 'completed'; token mode: the commit status posted.
    check_state      TEXT,
    -- Annotations already sent to the check run (they are appended, never replaced).
    annotations_sent BIGINT NOT NULL DEFAULT 0,
    comment_id       BIGINT,
    review_id        BIGINT,
    state            TEXT NOT NULL CHECK (state IN ('started', 'stored', 'published', 'failed')),
    error            TEXT,
    created_at_ms    BIGINT NOT NULL,
    updated_at_ms    BIGINT NOT NULL,
    published_at_ms  BIGINT
);
CREATE INDEX publications_pr ON publications (repo_id, pr_number);
CREATE INDEX publications_run ON publications (run_id);

-- The one summary comment of each pull request.
CREATE TABLE pr_comments (
    repo_id       BIGINT NOT NULL,
    pr_number     BIGINT NOT NULL,
    comment_id    BIGINT NOT NULL,
    job_id        BIGINT,
    head_sha      TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (repo_id, pr_number)
);

-- Inline review comments, one per finding key (path, rule, resource) and pull request.
CREATE TABLE review_comments (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id        BIGINT NOT NULL,
    pr_number      BIGINT NOT NULL,
    finding_key    TEXT NOT NULL,
    path           TEXT NOT NULL,
    rule           TEXT NOT NULL,
    subject        TEXT NOT NULL,
    line           BIGINT NOT NULL,
    comment_id     BIGINT NOT NULL,
    review_id      BIGINT,
    job_id         BIGINT,
    head_sha       TEXT NOT NULL,
    posted_at_ms   BIGINT NOT NULL,
    resolved_at_ms BIGINT,
    reply_id       BIGINT,
    UNIQUE (repo_id, pr_number, finding_key)
);
