-- meshward history store, version 7: route destinations by whether they reach pods
-- (PostgreSQL; keep in step with ../sqlite). Rows written before this version hold 0:
-- those runs were checked before routes were modelled.

-- Per run, revision and cluster, and per namespace: VirtualService and Gateway API
-- route destinations that reach pods, that route nowhere (no such host, port or
-- subset, or a subset selecting no pod), and that could not be checked.
ALTER TABLE coverage_totals ADD COLUMN routes_resolving BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_totals ADD COLUMN routes_nowhere BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_totals ADD COLUMN routes_unchecked BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_namespaces ADD COLUMN routes_resolving BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_namespaces ADD COLUMN routes_nowhere BIGINT NOT NULL DEFAULT 0;
ALTER TABLE coverage_namespaces ADD COLUMN routes_unchecked BIGINT NOT NULL DEFAULT 0;
