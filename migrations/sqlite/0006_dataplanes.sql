-- meshward history store, version 6: workloads by data plane and AuthorizationPolicies
-- by how they are enforced (SQLite; keep in step with ../postgres). Rows written
-- before this version hold 0 in every new column: those runs were checked before
-- ambient mode was modelled (their workloads count as with a proxy or not, their
-- policies are not counted by enforcement).

-- Per run, revision and cluster: namespaces labelled istio.io/dataplane-mode=ambient;
-- workloads ztunnel captures, and of those the ones a waypoint serves; and
-- AuthorizationPolicies enforced as written, reduced to L4 by ztunnel, not enforced.
ALTER TABLE coverage_totals ADD COLUMN namespaces_ambient BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_totals ADD COLUMN workloads_ambient BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_totals ADD COLUMN workloads_waypoint BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_totals ADD COLUMN authz_as_written BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_totals ADD COLUMN authz_reduced_to_l4 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_totals ADD COLUMN authz_not_enforced BIGINT NOT NULL DEFAULT 0;

-- Per run, revision, cluster and namespace: the same, but for namespaces_ambient.
ALTER TABLE coverage_namespaces ADD COLUMN workloads_ambient BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_namespaces ADD COLUMN workloads_waypoint BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_namespaces ADD COLUMN authz_as_written BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_namespaces ADD COLUMN authz_reduced_to_l4 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_namespaces ADD COLUMN authz_not_enforced BIGINT NOT NULL DEFAULT 0;

-- Per evidence subject: bytes received without mTLS (ztunnel's and the sidecars'
-- istio_tcp_received_bytes_total), which show a plaintext connection opened before the
-- window. Evidence stored before this version did not ask: 0.
ALTER TABLE evidence ADD COLUMN tcp_bytes_plaintext BIGINT NOT NULL DEFAULT 0;
