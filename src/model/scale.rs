//! How many proxies a workload runs and what each requests: HorizontalPodAutoscalers
//! and the `sidecar.istio.io/proxyCPU` / `proxyMemory` annotations.

use super::labels::Labels;
use crate::config::MeshConfig;
use crate::manifest::Resource;
use crate::pointer::At;
use crate::units::quantity;
use foldhash::HashMap;
use serde::Serialize;
use serde_json::Value as Json;

pub const PROXY_CPU: &str = "sidecar.istio.io/proxyCPU";
pub const PROXY_MEMORY: &str = "sidecar.istio.io/proxyMemory";

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Autoscaler {
    pub resource: String,
    pub min_replicas: Option<i64>,
    /// None when the HPA has no valid `spec.maxReplicas` (the API server requires it).
    pub max_replicas: Option<i64>,
}

/// The requests of one proxy of a workload.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct ProxyRequests {
    /// The quantity as written (annotation value, or the configured default).
    pub cpu: String,
    pub cpu_millicores: u64,
    pub memory: String,
    pub memory_bytes: u64,
    /// Which of the two come from the pod's annotations (the rest are defaults).
    pub from_annotations: Vec<String>,
    /// Annotations that are not quantities: the injected pod spec would be rejected.
    pub problems: Vec<String>,
}

/// HPAs by the workload they scale: `(namespace, kind, name)`. When two HPAs target
/// one workload, the larger maxReplicas is kept (it bounds the proxies).
pub fn autoscalers(resources: &[Resource]) -> HashMap<(String, String, String), Autoscaler> {
    let mut out: HashMap<(String, String, String), Autoscaler> = HashMap::default();
    for r in resources.iter().filter(|r| {
        r.kind == "HorizontalPodAutoscaler" && r.api_version.starts_with("autoscaling/")
    }) {
        let (Some(ns), Some(kind), Some(name)) = (
            r.namespace.as_deref(),
            r.body
                .at("/spec/scaleTargetRef/kind")
                .and_then(Json::as_str),
            r.body
                .at("/spec/scaleTargetRef/name")
                .and_then(Json::as_str),
        ) else {
            continue;
        };
        let hpa = Autoscaler {
            resource: r.id.clone(),
            min_replicas: r.body.at("/spec/minReplicas").and_then(Json::as_i64),
            max_replicas: r
                .body
                .at("/spec/maxReplicas")
                .and_then(Json::as_i64)
                .filter(|n| *n >= 0),
        };
        let key = (ns.to_string(), kind.to_string(), name.to_string());
        match out.get(&key) {
            Some(old) if old.max_replicas >= hpa.max_replicas => {}
            _ => {
                out.insert(key, hpa);
            }
        }
    }
    out
}

/// What one proxy of a pod with these annotations requests.
pub fn proxy_requests(annotations: &Labels, mesh: &MeshConfig) -> ProxyRequests {
    let mut out = ProxyRequests::default();
    // The defaults were validated when the config was read; 0 is never reached.
    let default_cpu = quantity::cpu_millicores(&mesh.proxy_cpu).unwrap_or(0);
    let default_memory = quantity::memory_bytes(&mesh.proxy_memory).unwrap_or(0);
    (out.cpu, out.cpu_millicores) = (mesh.proxy_cpu.clone(), default_cpu);
    (out.memory, out.memory_bytes) = (mesh.proxy_memory.clone(), default_memory);
    if let Some(v) = annotations.get(PROXY_CPU) {
        match quantity::cpu_millicores(v) {
            Ok(m) => {
                (out.cpu, out.cpu_millicores) = (v.clone(), m);
                out.from_annotations.push(PROXY_CPU.into());
            }
            Err(e) => out.problems.push(invalid(PROXY_CPU, &e)),
        }
    }
    if let Some(v) = annotations.get(PROXY_MEMORY) {
        match quantity::memory_bytes(v) {
            Ok(b) => {
                (out.memory, out.memory_bytes) = (v.clone(), b);
                out.from_annotations.push(PROXY_MEMORY.into());
            }
            Err(e) => out.problems.push(invalid(PROXY_MEMORY, &e)),
        }
    }
    out
}

fn invalid(annotation: &str, problem: &str) -> String {
    format!(
        "annotation {annotation}: {problem}; the injector copies it into the pod spec, where the API server rejects it, so new pods will not be created (the default is counted here)"
    )
}
