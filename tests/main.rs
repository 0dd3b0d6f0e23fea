//! The integration tests, as one binary: one link of the crate and its dependencies
//! instead of one per file (CI links in minutes and writes a fraction of the disk).
//! Each module is a file of this folder.

mod common;
mod prometheus_support;
#[macro_use]
mod service_support;

mod ambient_authz;
mod ambient_mixed;
mod ambient_waypoints;
mod changes;
mod cli;
mod dashboard_browser;
mod deploy;
mod diff;
mod dockerfile;
mod evidence_prometheus;
mod evidence_report;
mod formats;
mod limits;
mod policies_total;
mod publish;
mod publish_render;
mod readme_policy;
mod render;
mod render_clusters;
mod render_controllers;
mod rules;
mod schema;
mod service_evidence;
mod service_process;
mod service_queue;
mod service_webhook;
mod store_contract;
mod store_migrations;
mod traffic;
mod trends_api;
mod trends_cli;
mod trust_checked;
mod trust_objects;
mod trust_unknown;
mod yaml_kubectl;
