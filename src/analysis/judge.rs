//! Judging one mesh: the models of base and head, the evidence, the policies over
//! each, and base against head. A repository that deploys to several clusters is
//! judged once per cluster (see `clusters`).

use super::diff::{self, diff};
use super::evaluate::{evaluate_revisions, prepare, Evaluated, ModelValue};
use super::{gather_evidence, Options};
use crate::config::RepoConfig;
use crate::evidence::Evidence;
use crate::finding::{Finding, Status};
use crate::manifest;
use crate::model::{self, Model};
use crate::policy::input::{policy_value, BodyValues};
use crate::policy::{Policies, PolicyLimits};
use crate::render::AppNamespaceLabels;
use crate::schema;

/// One revision's objects of one mesh, with its model where it was built already.
pub(super) struct Side {
    pub(super) loaded: manifest::Loaded,
    pub(super) labels: Vec<AppNamespaceLabels>,
    pub(super) model: Option<Model>,
    pub(super) label: String,
    /// CustomResourceDefinitions from `.meshward.yaml` `schemas:` (and what reading
    /// them found).
    pub(super) schemas: std::sync::Arc<manifest::Loaded>,
}

/// What judging needs besides the revisions.
pub(super) struct Judge<'a> {
    pub(super) opts: &'a Options,
    pub(super) config: &'a RepoConfig,
    pub(super) policies: &'a Policies,
    pub(super) limits: &'a PolicyLimits,
}

pub(super) struct Judged {
    /// Head's findings, each introduced or existing, and base's resolved ones.
    pub(super) findings: Vec<Finding>,
    pub(super) head: Evaluated,
    pub(super) base: Option<Evaluated>,
    /// Head objects that are new or differ from base's; None without a base.
    pub(super) changed: Option<std::collections::BTreeSet<String>>,
    pub(super) evidence: Option<Evidence>,
    pub(super) notes: Vec<String>,
}

impl Judge<'_> {
    /// Judges one mesh; its policy findings are marked with `cluster`.
    pub(super) fn judge(
        &self,
        mut head: Side,
        base: Option<Side>,
        cluster: Option<&str>,
    ) -> Judged {
        let config = self.config;
        let mut notes = Vec::new();
        let base_schemas = base.as_ref().map(|b| b.schemas.clone());
        let base_loaded = base.map(|b| {
            let model = b.model.unwrap_or_else(|| {
                model::build_with(&b.loaded.resources, &config.mesh, None, &b.labels)
            });
            (b.loaded, model, b.label)
        });
        let base_model = base_loaded.as_ref().map(|(_, m, _)| m);
        // Base's model is in both policy inputs (head's `base`, base's `model` and
        // `base`): converted once and shared, as it is one of the largest parts of either.
        // Head's model was built without base's: kept unless base changes it.
        let head_built = head
            .model
            .take()
            .filter(|m| base_model.is_none_or(|b| model::same_against(m, b)))
            .map(|mut m| {
                if let Some(b) = base_model {
                    m.service_account_changed = model::service_account_changed(&m, b);
                }
                m
            });
        let (head_model, (base_value, bodies)) = rayon::join(
            || {
                head_built.unwrap_or_else(|| {
                    model::build_with(
                        &head.loaded.resources,
                        &config.mesh,
                        base_model,
                        &head.labels,
                    )
                })
            },
            || {
                // Side by side: where head's model is kept, this is all there is to do.
                let base_resources = base_loaded.iter().flat_map(|(l, _, _)| &l.resources);
                rayon::join(
                    || base_model.map(policy_value),
                    || BodyValues::of(head.loaded.resources.iter().chain(base_resources)),
                )
            },
        );
        tracing::debug!("models built");
        let evidence = match &self.opts.evidence {
            Some(e) => Some(e.clone()),
            None => gather_evidence(self.opts, config, &head_model, base_model, &mut notes),
        };
        let random = (
            base_loaded
                .as_ref()
                .map(|(l, _, _)| diff::random_names(&l.resources))
                .unwrap_or_default(),
            diff::random_names(&head.loaded.resources),
        );
        let changed = base_loaded
            .as_ref()
            .map(|(l, _, _)| super::changed_resources(&l.resources, &head.loaded.resources));
        let shared = base_loaded
            .as_ref()
            .map(|(l, _, _)| shared_objects(&l.resources, &head.loaded.resources))
            .unwrap_or_default();
        // The API server's net reads the bodies: before they are let go. Against the
        // same CRDs, an object base holds as head does is refused alike: checked once.
        let catalog_of = |loaded: &manifest::Loaded, extra: &manifest::Loaded| {
            schema::Catalog::of(&loaded.resources, &extra.resources)
        };
        let (head_catalog, base_catalog) = rayon::join(
            || catalog_of(&head.loaded, &head.schemas),
            || {
                base_loaded
                    .as_ref()
                    .zip(base_schemas.as_ref())
                    .map(|((l, _, _), extra)| catalog_of(l, extra))
            },
        );
        let alike = base_catalog
            .as_ref()
            .is_some_and(|b| b.same_crds(&head_catalog));
        let head_objects = head_catalog.check(&head.loaded.resources, |_| true);
        let schema_of =
            |catalog: &schema::Catalog, extra: &manifest::Loaded, objects: Vec<schema::Checked>| {
                let mut found: Vec<schema::Checked> = extra
                    .findings
                    .iter()
                    .cloned()
                    .map(schema::Checked::from)
                    .collect();
                found.extend(catalog.crd_findings());
                found.extend(objects);
                found
            };
        let base_schema = base_loaded
            .as_ref()
            .zip(base_schemas.as_ref())
            .zip(base_catalog.as_ref())
            .map(|(((l, _, _), extra), catalog)| {
                let is_shared = |r: &manifest::Resource| alike && shared.contains(&r.id);
                let mut objects = catalog.check(&l.resources, |r| !is_shared(r));
                if alike {
                    objects.extend(
                        head_objects
                            .iter()
                            .filter(|c| {
                                c.finding
                                    .resource
                                    .as_ref()
                                    .is_some_and(|r| shared.contains(&r.id()))
                            })
                            .cloned(),
                    );
                }
                schema_of(catalog, extra, objects)
            })
            .unwrap_or_default();
        let head_schema = schema_of(&head_catalog, &head.schemas, head_objects);
        tracing::debug!("schemas checked");
        // From here on the policy values stand for the bodies: the parsed JSON, the
        // largest part of a revision held twice, is let go before the evaluation.
        let head_bodies = bodies.of_each(&head.loaded.resources);
        let mut released = Vec::new();
        let mut base_loaded = base_loaded.map(|(mut l, m, label)| {
            let values = bodies.of_each(&l.resources);
            released.extend(release_bodies(&mut l.resources));
            (l, m, label, values)
        });
        released.extend(release_bodies(&mut head.loaded.resources));
        released.extend(bodies.into_bodies());
        // A hundred thousand JSON trees take a while to free: on every core.
        {
            use rayon::prelude::*;
            released.into_par_iter().for_each(drop);
        }
        let evidence_ref = evidence.as_ref();
        let head_label = head.label;
        // Head's model value is built against base's model, which base's input is
        // prepared without (its value is built already) and gets after.
        let (base_rest, base_model): (Option<_>, Option<Model>) = base_loaded
            .take()
            .map(|(loaded, model, label, bodies)| ((loaded, label, bodies), model))
            .unzip();
        let (head_ready, base_ready) = rayon::join(
            || {
                let own = match base_model.as_ref().zip(base_value.as_ref()) {
                    Some((model, value)) => ModelValue::Against(model, value),
                    None => ModelValue::Alone,
                };
                prepare(
                    (head.loaded, head_model),
                    head_schema,
                    own,
                    base_value.as_ref(),
                    head_bodies,
                    &head_label,
                    config,
                    evidence_ref,
                )
            },
            || {
                // Base is judged against itself: nothing in it is "introduced".
                base_rest
                    .zip(base_value.as_ref())
                    .map(|((loaded, label, bodies), value)| {
                        prepare(
                            (loaded, Model::default()),
                            base_schema,
                            ModelValue::Built(value),
                            Some(value),
                            bodies,
                            &label,
                            config,
                            evidence_ref,
                        )
                    })
            },
        );
        let base_ready = base_ready.zip(base_model).map(|(p, m)| p.with_model(m));
        let (head_eval, base_eval) = evaluate_revisions(
            head_ready,
            base_ready.map(|b| (b, shared)),
            (self.policies, self.limits),
            config,
        );
        drop(base_value);
        let mut findings = match &base_eval {
            Some(b) => diff((&b.findings, &random.0), (&head_eval.findings, &random.1)),
            None => head_eval.findings.clone(),
        };
        // An object this change edits whose schema rule could not be evaluated was
        // not checked: it does not pass because base could not check it either.
        if let Some(changed) = &changed {
            for f in &mut findings {
                let edited = f
                    .resource
                    .as_ref()
                    .is_some_and(|r| changed.contains(&r.id()));
                if f.rule == schema::NOT_CHECKED && f.status == Status::Existing && edited {
                    f.unchecked = true;
                    f.message
                        .push_str(" This change edits the object, so it does not pass unchecked.");
                }
            }
        }
        // Render and input findings carry their cluster already; the policies'
        // are about this mesh. Marked after the diff, which is within one mesh.
        if let Some(cluster) = cluster {
            for f in &mut findings {
                f.cluster.get_or_insert_with(|| cluster.to_string());
            }
        }
        Judged {
            findings,
            head: head_eval,
            base: base_eval,
            changed,
            evidence,
            notes,
        }
    }
}

/// Replaces every body with one shared null; returns the bodies.
fn release_bodies(resources: &mut [manifest::Resource]) -> Vec<std::sync::Arc<serde_json::Value>> {
    let null = std::sync::Arc::new(serde_json::Value::Null);
    resources
        .iter_mut()
        .map(|r| std::mem::replace(&mut r.body, null.clone()))
        .collect()
}

/// Ids of the objects base holds exactly as head does: one copy in each, the same
/// parsed body (the same file, unchanged).
fn shared_objects(
    base: &[manifest::Resource],
    head: &[manifest::Resource],
) -> foldhash::HashSet<String> {
    use foldhash::HashMap;
    fn copies(resources: &[manifest::Resource]) -> HashMap<&str, Vec<usize>> {
        let mut by_id: HashMap<&str, Vec<usize>> = HashMap::default();
        for r in resources {
            by_id
                .entry(r.id.as_str())
                .or_default()
                .push(std::sync::Arc::as_ptr(&r.body) as usize);
        }
        by_id
    }
    let head = copies(head);
    copies(base)
        .into_iter()
        .filter(|(id, bodies)| bodies.len() == 1 && head.get(id) == Some(bodies))
        .map(|(id, _)| id.to_string())
        .collect()
}
