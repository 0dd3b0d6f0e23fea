//! Where each route rule a change touches sends its traffic: the share of each
//! destination by weight and whether it reaches pods, before and after. "This
//! VirtualService now sends 10% of its traffic to a subset no DestinationRule
//! defines" is said here, beside the findings.

use super::Change;
use crate::model::traffic::Destination;
use crate::model::Model;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One route rule (`spec.http[0]`, `spec.rules[1]`) the change adds or changes, or
/// whose destinations it moves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteChange {
    pub resource: String,
    /// `spec.http[0]`
    pub rule: String,
    pub change: Change,
    pub base: Option<RouteShares>,
    pub head: RouteShares,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteShares {
    pub destinations: Vec<Share>,
    /// Percent of the rule's traffic that reaches pods; None when a destination with a
    /// share could not be checked.
    pub reaching: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub host: String,
    pub subset: Option<String>,
    pub percent: u32,
    /// `reaches`, `no-such-host`, `no-such-port`, `no-such-subset`, `no-pods`,
    /// `not-checked`.
    pub outcome: String,
    /// Workloads the subset selects, where known.
    pub pods: Option<usize>,
}

impl Share {
    pub fn reaches(&self) -> bool {
        self.outcome == "reaches"
    }
}

/// The rule a destination belongs to: `spec.<section>[i]`, from its path.
fn rule_of(d: &Destination) -> Option<String> {
    match d.path.as_slice() {
        [spec, section, index, ..] => Some(format!(
            "{}.{}[{}]",
            spec.as_str()?,
            section.as_str()?,
            index.as_u64()?
        )),
        _ => None,
    }
}

/// Route rules of a model, by (resource, rule).
fn rules(model: &Model) -> BTreeMap<(String, String), RouteShares> {
    let mut grouped: BTreeMap<(String, String), Vec<&Destination>> = BTreeMap::new();
    for d in model
        .traffic
        .destinations
        .iter()
        .filter(|d| d.role != "mirror")
    {
        if let Some(rule) = rule_of(d) {
            grouped
                .entry((d.resource.clone(), rule))
                .or_default()
                .push(d);
        }
    }
    grouped
        .into_iter()
        .map(|(key, ds)| (key, shares(&ds)))
        .collect()
}

/// Percent of traffic per destination: weights relative to their sum; with no weight
/// set, an even split. A VirtualService destination without a weight among weighted
/// ones gets none; a backendRef's weight defaults to 1 (Gateway API).
fn shares(ds: &[&Destination]) -> RouteShares {
    let any_weight = ds.iter().any(|d| d.weight.is_some());
    let weights: Vec<u64> = ds
        .iter()
        .map(|d| match (d.weight, any_weight, d.role.as_str()) {
            (Some(w), _, _) => w.max(0) as u64,
            (None, false, _) | (None, true, "backend") => 1,
            (None, true, _) => 0,
        })
        .collect();
    let total: u64 = weights.iter().sum();
    let destinations: Vec<Share> = ds
        .iter()
        .zip(&weights)
        .map(|(d, w)| Share {
            host: d.host.clone(),
            subset: d.subset.clone(),
            percent: (w * 100 + total / 2).checked_div(total).unwrap_or(0) as u32,
            outcome: d.outcome().to_string(),
            pods: d.subset_pods,
        })
        .collect();
    let unchecked = destinations
        .iter()
        .any(|s| s.outcome == "not-checked" && s.percent > 0);
    let reaching = (!unchecked).then(|| {
        destinations
            .iter()
            .filter(|s| s.reaches())
            .map(|s| s.percent)
            .sum::<u32>()
            .min(100)
    });
    RouteShares {
        destinations,
        reaching,
    }
}

pub(super) fn of(base: &Model, head: &Model) -> Vec<RouteChange> {
    let before = rules(base);
    let mut out = Vec::new();
    for ((resource, rule), now) in rules(head) {
        let then = before.get(&(resource.clone(), rule.clone()));
        let change = match then {
            None => Change::Added,
            Some(t) if t == &now => continue,
            Some(t) => {
                let written = |s: &RouteShares| {
                    s.destinations
                        .iter()
                        .map(|d| (d.host.clone(), d.subset.clone(), d.percent))
                        .collect::<Vec<_>>()
                };
                if written(t) == written(&now) {
                    Change::SelectionChanged
                } else {
                    Change::Changed
                }
            }
        };
        out.push(RouteChange {
            resource,
            rule,
            change,
            base: then.cloned(),
            head: now,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(
        host: &str,
        subset: Option<&str>,
        weight: Option<i64>,
        pods: Option<usize>,
    ) -> Destination {
        Destination {
            resource: "VirtualService/shop/cart".into(),
            kind: "VirtualService".into(),
            namespace: "shop".into(),
            role: "route".into(),
            path: vec!["spec".into(), "http".into(), 0.into(), "route".into()],
            host: host.into(),
            fqdn: format!("{host}.shop.svc.cluster.local"),
            status: "found".into(),
            reason: String::new(),
            target: Some(format!("Service/shop/{host}")),
            target_ports: vec![8080],
            port: None,
            port_path: Vec::new(),
            subset: subset.map(str::to_string),
            subset_path: Vec::new(),
            subset_status: if subset.is_some() { "found" } else { "" }.into(),
            known_subsets: Vec::new(),
            subset_pods: pods,
            weight,
            gateway_only: false,
            reference_grant: String::new(),
        }
    }

    #[test]
    fn a_canary_to_a_subset_without_pods_reaches_only_the_stable_share() {
        let stable = dest("cart", Some("v1"), Some(90), Some(2));
        let canary = dest("cart", Some("v2"), Some(10), Some(0));
        let s = shares(&[&stable, &canary]);
        assert_eq!(s.reaching, Some(90));
        assert_eq!(s.destinations[1].outcome, "no-pods");
    }

    #[test]
    fn unweighted_destinations_split_evenly_and_unknown_hosts_leave_it_open() {
        let a = dest("cart", None, None, None);
        let mut b = dest("api.example.com", None, None, None);
        b.status = "unknown".into();
        let s = shares(&[&a, &b]);
        assert_eq!(
            s.destinations.iter().map(|d| d.percent).collect::<Vec<_>>(),
            [50, 50]
        );
        assert_eq!(s.reaching, None);
    }
}
