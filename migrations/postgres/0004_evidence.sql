-- meshward history store, version 4: the telemetry evidence each run's mTLS rules
-- were judged on (one row per subject: a namespace, or a workload-level scope), with
-- the queries, so the numbers can be traced and rerun. Same SQL on both backends.

CREATE TABLE evidence (
    run_id                    BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    subject                   TEXT NOT NULL,   -- namespace:<ns> or workload:<ns>:<labels>
    source                    TEXT,            -- e.g. "prometheus https://… (cluster=prod-eu1), retention 30d"
    time_window               TEXT,            -- e.g. "7d"
    taken_at_ms               BIGINT,
    requests_total            BIGINT NOT NULL,
    requests_plaintext        BIGINT NOT NULL,
    tcp_connections_total     BIGINT NOT NULL,
    tcp_connections_plaintext BIGINT NOT NULL,
    queries                   TEXT NOT NULL,   -- JSON object: number name -> PromQL
    workloads                 TEXT NOT NULL,   -- JSON array of destination workloads
    error                     TEXT,            -- why there are no numbers
    PRIMARY KEY (run_id, subject)
);
CREATE INDEX evidence_subject ON evidence (subject, taken_at_ms);
