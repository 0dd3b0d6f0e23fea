//! Rendering: kustomize overlays, Helm charts, and the Argo CD / Flux app objects that
//! point at them, turned into the objects a GitOps controller would apply. Rendering
//! is untrusted work: real binaries, no network, no plugins or exec, confined to the
//! checkout, with time and output limits. Every failure is a finding on the root.
//!
//! Down the stages: [`discovery`] finds roots in the file listing, [`apps`] reads the
//! app objects that point at roots, [`planning`] settles the final roots,
//! [`running`] renders one inside the [`sandbox`] with the [`tools`], and
//! [`source_map`] maps what it produced back to the files behind it. [`revision`]
//! runs those stages over one revision: the entry the pipeline calls.

pub mod apps;
mod clusters;
pub mod context;
mod discovery;
pub mod helm;
pub mod kustomize;
mod planned;
mod planning;
mod problem;
mod revision;
pub mod roots;
mod running;
mod sandbox;
mod source_map;
mod template_values;
pub mod tools;

pub use crate::child::memory_limit;
pub use apps::AppNamespaceLabels;
pub use discovery::{discover, Discovery};
pub use planned::{DirectoryRoot, PlannedRoot};
pub use planning::Plan;
pub use problem::Problem;
pub use revision::RootStatus;
pub(crate) use revision::{
    context, failure_status, is_manifest, parse_shared, revision, RenderedRevision, RenderedRoots,
    Settings, APPS, LINKED, TOUCHED,
};
pub use roots::RepoUrls;
pub use running::{render_root, Rendered};
pub use source_map::{Patch, SourceMap};
pub use tools::{RenderLimits, Tools};
