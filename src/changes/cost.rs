//! What the change's proxies cost: for each workload whose injection or scale
//! changes, the proxies before and after (replicas, or the HPA's maxReplicas where one
//! scales it) times what each proxy requests.

use crate::config::MeshConfig;
use crate::model::{Model, Workload};
use crate::units::quantity::{bytes_text, cores_text};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProxyCost {
    /// "enables 24 proxies: +2.4 CPU, +3 GiB requested"; None when nothing changes.
    pub summary: Option<String>,
    pub proxies_added: i64,
    pub proxies_removed: i64,
    /// Net change of the proxies' requests.
    pub cpu_millicores: i64,
    pub memory_bytes: i64,
    /// The per-proxy requests used where a pod has no annotation.
    pub default_cpu: String,
    pub default_memory: String,
    pub workloads: Vec<ProxyCostItem>,
    /// Workloads whose proxies cannot be counted from the repository.
    pub uncounted: Vec<Uncounted>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyCostItem {
    pub workload: String,
    pub base_proxies: i64,
    pub head_proxies: i64,
    /// `replicas` or `autoscaler` (the HPA's maxReplicas).
    pub counted_from: String,
    pub autoscaler: Option<String>,
    pub cpu_per_proxy: String,
    pub memory_per_proxy: String,
    pub cpu_millicores: i64,
    pub memory_bytes: i64,
    pub reason: String,
    /// Injection is on but the pods predate it: the cost comes with the next rollout.
    pub pending_rollout: bool,
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Uncounted {
    pub workload: String,
    pub reason: String,
}

/// Proxies a workload runs when injected, and from what: None when the repository
/// does not say (DaemonSets, Jobs).
fn pods(w: &Workload) -> Option<(i64, &'static str)> {
    match w.autoscaler.as_ref().and_then(|a| a.max_replicas) {
        Some(max) => Some((max, "autoscaler")),
        None => w.replicas.map(|r| (r.max(0), "replicas")),
    }
}

fn uncounted_reason(w: &Workload) -> String {
    match w.kind.as_str() {
        "DaemonSet" => {
            "a DaemonSet runs one proxy per node; the node count is not in the repository".into()
        }
        "Job" | "CronJob" => format!(
            "a {} runs one proxy per pod while it runs; not counted",
            w.kind
        ),
        _ => "its replica count is not known".into(),
    }
}

fn injected_base(w: &Workload) -> bool {
    w.proxy
}

/// In head, a workload whose namespace just gained injection counts: its proxies come
/// with its next rollout.
fn injected_head(w: &Workload) -> bool {
    w.proxy || w.pending_rollout
}

fn turned_on_text(w: &Workload) -> String {
    let what = match w.proxy_via.as_deref() {
        Some("namespace-label") => {
            format!("namespace {} gets istio-injection=enabled", w.namespace)
        }
        Some("namespace-revision") => {
            format!("namespace {} gets an istio.io/rev label", w.namespace)
        }
        Some("pod-opt-in") => "its pods opt in (sidecar.istio.io/inject: \"true\")".to_string(),
        Some("pod-revision") => "its pods opt in (istio.io/rev label)".to_string(),
        Some("template") => "istio-proxy is added to its pod template".to_string(),
        _ => w.proxy_reason.clone(),
    };
    if w.pending_rollout {
        format!(
            "{what}; the proxies arrive when its pods are recreated (injection/rollout-required)"
        )
    } else {
        what
    }
}

fn scale_text(b: &Workload, h: &Workload) -> Option<String> {
    let mut parts = Vec::new();
    match (&b.autoscaler, &h.autoscaler) {
        (Some(x), Some(y)) if x.max_replicas != y.max_replicas => parts.push(format!(
            "HPA maxReplicas {} → {}",
            opt(x.max_replicas),
            opt(y.max_replicas)
        )),
        (None, Some(y)) => parts.push(format!(
            "{} now scales it up to {} replicas",
            display(&y.resource),
            opt(y.max_replicas)
        )),
        (Some(x), None) => parts.push(format!(
            "{} removed; replicas {}",
            display(&x.resource),
            opt(h.replicas)
        )),
        _ => {}
    }
    if h.autoscaler.is_none() && b.replicas != h.replicas {
        parts.push(format!(
            "replicas {} → {}",
            opt(b.replicas),
            opt(h.replicas)
        ));
    }
    let (bp, hp) = (&b.proxy_requests, &h.proxy_requests);
    if bp.cpu_millicores != hp.cpu_millicores || bp.memory_bytes != hp.memory_bytes {
        parts.push(format!(
            "requests per proxy {}/{} → {}/{}",
            bp.cpu, bp.memory, hp.cpu, hp.memory
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn opt(n: Option<i64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_else(|| "?".into())
}

/// `Kind/ns/name` → `Kind ns/name`
pub fn display(id: &str) -> String {
    match id.split_once('/') {
        Some((kind, rest)) => format!("{kind} {rest}"),
        None => id.to_string(),
    }
}

pub fn of(base: &Model, head: &Model, mesh: &MeshConfig) -> ProxyCost {
    let b_by: HashMap<&str, &Workload> =
        base.workloads.iter().map(|w| (w.id.as_str(), w)).collect();
    let h_by: HashMap<&str, &Workload> =
        head.workloads.iter().map(|w| (w.id.as_str(), w)).collect();
    let ids: BTreeSet<&str> = b_by.keys().chain(h_by.keys()).copied().collect();
    let mut cost = ProxyCost {
        default_cpu: mesh.proxy_cpu.clone(),
        default_memory: mesh.proxy_memory.clone(),
        ..Default::default()
    };
    for id in ids {
        let (b, h) = (b_by.get(id).copied(), h_by.get(id).copied());
        let on_b = b.is_some_and(injected_base);
        let on_h = h.is_some_and(injected_head);
        if !on_b && !on_h {
            continue;
        }
        let count_b = b.filter(|_| on_b).map(pods);
        let count_h = h.filter(|_| on_h).map(pods);
        // A side that is injected but cannot be counted: say so, once, if it matters.
        if matches!(count_b, Some(None)) || matches!(count_h, Some(None)) {
            if on_b != on_h {
                if let Some(w) = h.or(b) {
                    cost.uncounted.push(Uncounted {
                        workload: w.id.clone(),
                        reason: uncounted_reason(w),
                    });
                }
            }
            continue;
        }
        let n_b = count_b.flatten().map_or(0, |(n, _)| n);
        let n_h = count_h.flatten().map_or(0, |(n, _)| n);
        let req = |w: Option<&Workload>, n: i64| {
            w.map_or((0, 0), |w| {
                (
                    n * w.proxy_requests.cpu_millicores as i64,
                    n * w.proxy_requests.memory_bytes as i64,
                )
            })
        };
        let (cpu_b, mem_b) = req(b, n_b);
        let (cpu_h, mem_h) = req(h, n_h);
        if n_b == n_h && cpu_b == cpu_h && mem_b == mem_h {
            continue;
        }
        let reason = match (b, h) {
            (_, None) => "removed from the repository".to_string(),
            (None, Some(h)) => format!("new workload: {}", turned_on_text(h)),
            (Some(_), Some(h)) if !on_b => format!("injection turned on: {}", turned_on_text(h)),
            (Some(_), Some(h)) if !on_h && h.ambient => format!(
                "moves to ambient: {}; ztunnel, one per node, takes over from the sidecars",
                h.dataplane_reason
            ),
            (Some(_), Some(h)) if !on_h => format!("injection turned off: {}", h.proxy_reason),
            (Some(b), Some(h)) => scale_text(b, h).unwrap_or_else(|| "scaled".to_string()),
        };
        let shown = h.or(b);
        let counted = count_h.flatten().or(count_b.flatten());
        cost.workloads.push(ProxyCostItem {
            workload: id.to_string(),
            base_proxies: n_b,
            head_proxies: n_h,
            counted_from: counted.map_or("replicas", |(_, from)| from).to_string(),
            autoscaler: shown
                .and_then(|w| w.autoscaler.as_ref())
                .filter(|_| counted.is_some_and(|(_, f)| f == "autoscaler"))
                .map(|a| a.resource.clone()),
            cpu_per_proxy: shown
                .map(|w| w.proxy_requests.cpu.clone())
                .unwrap_or_default(),
            memory_per_proxy: shown
                .map(|w| w.proxy_requests.memory.clone())
                .unwrap_or_default(),
            cpu_millicores: cpu_h - cpu_b,
            memory_bytes: mem_h - mem_b,
            reason,
            pending_rollout: h.is_some_and(|h| h.pending_rollout),
            problems: h
                .map(|h| h.proxy_requests.problems.clone())
                .unwrap_or_default(),
        });
    }
    for item in &cost.workloads {
        let d = item.head_proxies - item.base_proxies;
        if d > 0 {
            cost.proxies_added += d;
        } else {
            cost.proxies_removed -= d;
        }
        cost.cpu_millicores += item.cpu_millicores;
        cost.memory_bytes += item.memory_bytes;
    }
    cost.summary = summary(&cost);
    cost
}

fn signed(text: String, n: i64) -> String {
    if n >= 0 {
        format!("+{text}")
    } else {
        text
    }
}

fn summary(c: &ProxyCost) -> Option<String> {
    let requests = format!(
        "{} CPU, {} requested",
        signed(cores_text(c.cpu_millicores), c.cpu_millicores),
        signed(bytes_text(c.memory_bytes), c.memory_bytes)
    );
    let plural = |n: i64| if n == 1 { "proxy" } else { "proxies" };
    let mut text = match (c.proxies_added, c.proxies_removed) {
        (0, 0) if c.workloads.is_empty() => None,
        (0, 0) => Some(format!("changes proxy requests: {requests}")),
        (a, 0) => Some(format!("enables {a} {}: {requests}", plural(a))),
        (0, r) => Some(format!("removes {r} {}: {requests}", plural(r))),
        (a, r) => Some(format!(
            "enables {a} and removes {r} {}: net {requests}",
            plural(r)
        )),
    };
    if !c.uncounted.is_empty() {
        let more = format!(
            "{} more workload{} not counted ({})",
            c.uncounted.len(),
            if c.uncounted.len() == 1 { "" } else { "s" },
            c.uncounted
                .iter()
                .map(|u| display(&u.workload))
                .collect::<Vec<_>>()
                .join(", ")
        );
        text = Some(match text {
            Some(t) => format!("{t}; {more}"),
            None => format!("proxies for {more}"),
        });
    }
    text
}
