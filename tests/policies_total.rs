//! The built-in policies run to the end on every model built from valid input: a
//! rule that crashes is a rule that silently did not run. Generated repositories
//! mix every kind the policies read, with optional fields left out, names and
//! namespaces drawn from small pools (so objects collide, repeat across files and
//! land in namespaces nobody declares), checked alone and as base → head.

use meshward::analysis::{analyze, Options, Revision};
use meshward::manifest::SourceFile;
use meshward::workspace::Tree;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Map, Value};

const NAMESPACES: &[&str] = &["default", "payments", "istio-system", "kube-system", "web"];
const NAMES: &[&str] = &["api", "web", "default", "db"];
const LABEL_KEYS: &[&str] = &[
    "app",
    "version",
    "istio-injection",
    "istio.io/rev",
    "istio.io/dataplane-mode",
    "istio.io/use-waypoint",
    "sidecar.istio.io/inject",
];
const LABEL_VALUES: &[&str] = &[
    "api", "web", "enabled", "disabled", "true", "false", "canary", "ambient", "none", "",
];
const WORKLOAD_KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("v1", "Pod"),
    ("batch/v1", "Job"),
];

fn labels() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(select(LABEL_KEYS), select(LABEL_VALUES), 0..3)
        .prop_map(|m| json!(m))
}

fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop::option::of(s)
}

fn metadata() -> impl Strategy<Value = Value> {
    (select(NAMES), opt(select(NAMESPACES)), opt(labels())).prop_map(|(name, ns, labels)| {
        let mut m = Map::new();
        m.insert("name".into(), json!(name));
        if let Some(ns) = ns {
            m.insert("namespace".into(), json!(ns));
        }
        if let Some(l) = labels {
            m.insert("labels".into(), l);
        }
        Value::Object(m)
    })
}

fn object(api: &str, kind: &str, metadata: Value, spec: Option<Value>) -> Value {
    let mut o = json!({"apiVersion": api, "kind": kind, "metadata": metadata});
    if let Some(spec) = spec {
        o["spec"] = spec;
    }
    o
}

/// `{field: value}` for the fields that are Some: optional fields left out.
fn fields(pairs: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect(),
    )
}

fn namespace() -> impl Strategy<Value = Value> {
    (select(NAMESPACES), opt(labels())).prop_map(|(name, labels)| {
        object(
            "v1",
            "Namespace",
            json!({"name": name, "labels": labels.unwrap_or(json!({}))}),
            None,
        )
    })
}

fn workload() -> impl Strategy<Value = Value> {
    (
        select(WORKLOAD_KINDS),
        metadata(),
        opt(labels()),
        opt(select(NAMES)),
        opt(select(&["true", "false"][..])),
        any::<bool>(),
    )
        .prop_map(
            |((api, kind), meta, pod_labels, sa, inject, host_network)| {
                let pod_spec = fields(vec![
                    ("serviceAccountName", sa.map(|s| json!(s))),
                    ("hostNetwork", host_network.then(|| json!(true))),
                    (
                        "containers",
                        Some(json!([{"name": "app", "image": "example/app:1"}])),
                    ),
                ]);
                let annotations = inject.map(|v| json!({"sidecar.istio.io/inject": v}));
                if kind == "Pod" {
                    let mut meta = meta;
                    if let Some(l) = pod_labels {
                        meta["labels"] = l;
                    }
                    if let Some(a) = annotations {
                        meta["annotations"] = a;
                    }
                    return object(api, kind, meta, Some(pod_spec));
                }
                let template_meta = fields(vec![
                    ("labels", pod_labels.clone()),
                    ("annotations", annotations),
                ]);
                let selector = pod_labels.map(|l| json!({"matchLabels": l}));
                let spec = fields(vec![
                    ("selector", selector),
                    (
                        "template",
                        Some(json!({"metadata": template_meta, "spec": pod_spec})),
                    ),
                ]);
                object(api, kind, meta, Some(spec))
            },
        )
}

fn selector() -> impl Strategy<Value = Option<Value>> {
    opt(labels().prop_map(|l| json!({"matchLabels": l})))
}

fn peer_authentication() -> impl Strategy<Value = Value> {
    (
        metadata(),
        selector(),
        opt(select(&["STRICT", "PERMISSIVE", "DISABLE", "UNSET"][..])),
        opt((1u32..9000, select(&["STRICT", "PERMISSIVE", "DISABLE"][..]))),
    )
        .prop_map(|(meta, sel, mode, port)| {
            let spec = fields(vec![
                ("selector", sel),
                ("mtls", mode.map(|m| json!({"mode": m}))),
                (
                    "portLevelMtls",
                    port.map(|(p, m)| json!({p.to_string(): {"mode": m}})),
                ),
            ]);
            object(
                "security.istio.io/v1",
                "PeerAuthentication",
                meta,
                Some(spec),
            )
        })
}

fn principal() -> impl Strategy<Value = String> {
    (
        select(&["cluster.local", "*", "other.domain"][..]),
        select(NAMESPACES),
        select(NAMES),
        any::<bool>(),
    )
        .prop_map(|(td, ns, sa, wild)| {
            if wild {
                format!("{td}/ns/{ns}/sa/*")
            } else {
                format!("{td}/ns/{ns}/sa/{sa}")
            }
        })
}

fn authorization_policy() -> impl Strategy<Value = Value> {
    let source = (
        opt(prop::collection::vec(principal(), 0..3)),
        opt(prop::collection::vec(select(NAMESPACES), 0..2)),
        opt(prop::collection::vec(principal(), 0..2)),
    )
        .prop_map(|(principals, namespaces, not_principals)| {
            json!({"source": fields(vec![
                ("principals", principals.map(|p| json!(p))),
                ("namespaces", namespaces.map(|n| json!(n))),
                ("notPrincipals", not_principals.map(|p| json!(p))),
            ])})
        });
    let operation = (
        opt(prop::collection::vec(select(&["GET", "POST"][..]), 0..2)),
        opt(prop::collection::vec(
            select(&["/api", "/admin/*"][..]),
            0..2,
        )),
        opt(prop::collection::vec(select(&["8080", "80"][..]), 0..2)),
    )
        .prop_map(|(methods, paths, ports)| {
            json!({"operation": fields(vec![
                ("methods", methods.map(|m| json!(m))),
                ("paths", paths.map(|p| json!(p))),
                ("ports", ports.map(|p| json!(p))),
            ])})
        });
    let condition = (
        select(&["source.ip", "request.headers[x-id]", "destination.port"][..]),
        prop::collection::vec(select(&["10.0.0.0/8", "a", "8080"][..]), 1..2),
    )
        .prop_map(|(key, values)| json!({"key": key, "values": values}));
    let rule = (
        opt(prop::collection::vec(source, 0..2)),
        opt(prop::collection::vec(operation, 0..2)),
        opt(prop::collection::vec(condition, 0..2)),
    )
        .prop_map(|(from, to, when)| {
            fields(vec![
                ("from", from.map(|f| json!(f))),
                ("to", to.map(|t| json!(t))),
                ("when", when.map(|w| json!(w))),
            ])
        });
    (
        metadata(),
        selector(),
        opt(select(&["ALLOW", "DENY", "AUDIT", "CUSTOM"][..])),
        opt(prop::collection::vec(rule, 0..3)),
        opt((
            select(&["Service", "Gateway", "ServiceEntry"][..]),
            select(NAMES),
        )),
    )
        .prop_map(|(meta, sel, action, rules, target)| {
            let provider = (action == Some("CUSTOM")).then(|| json!({"name": "ext-authz"}));
            let spec = fields(vec![
                ("selector", sel),
                ("action", action.map(|a| json!(a))),
                ("provider", provider),
                ("rules", rules.map(|r| json!(r))),
                (
                    "targetRefs",
                    target.map(|(kind, name)| {
                        let group = if kind == "Gateway" {
                            "gateway.networking.k8s.io"
                        } else if kind == "ServiceEntry" {
                            "networking.istio.io"
                        } else {
                            ""
                        };
                        json!([{"group": group, "kind": kind, "name": name}])
                    }),
                ),
            ]);
            object(
                "security.istio.io/v1",
                "AuthorizationPolicy",
                meta,
                Some(spec),
            )
        })
}

fn service() -> impl Strategy<Value = Value> {
    (
        metadata(),
        opt(labels()),
        opt(prop::collection::vec(
            (
                1u32..9000,
                opt(select(&["http", "grpc", "tcp", "http-web", "mongo"][..])),
            ),
            0..3,
        )),
    )
        .prop_map(|(meta, sel, ports)| {
            let ports = ports.map(|ps| {
                json!(ps
                    .into_iter()
                    .map(|(p, name)| fields(vec![
                        ("port", Some(json!(p))),
                        ("name", name.map(|n| json!(n)))
                    ]))
                    .collect::<Vec<_>>())
            });
            object(
                "v1",
                "Service",
                meta,
                Some(fields(vec![("selector", sel), ("ports", ports)])),
            )
        })
}

fn service_entry() -> impl Strategy<Value = Value> {
    (
        metadata(),
        prop::collection::vec(
            select(&["api.example.com", "db.internal", "*.example.org", "web"][..]),
            1..3,
        ),
        opt(select(&["MESH_INTERNAL", "MESH_EXTERNAL"][..])),
        opt(select(&["NONE", "STATIC", "DNS", "DNS_ROUND_ROBIN"][..])),
        opt(labels()),
        opt(prop::collection::vec(
            select(&["10.0.0.1", "db.internal"][..]),
            0..2,
        )),
    )
        .prop_map(
            |(meta, hosts, location, resolution, workload_selector, endpoints)| {
                let spec = fields(vec![
                    ("hosts", Some(json!(hosts))),
                    ("location", location.map(|l| json!(l))),
                    ("resolution", resolution.map(|r| json!(r))),
                    (
                        "ports",
                        Some(json!([{"number": 8080, "name": "http", "protocol": "HTTP"}])),
                    ),
                    (
                        "workloadSelector",
                        workload_selector.map(|l| json!({"labels": l})),
                    ),
                    (
                        "endpoints",
                        endpoints.map(|e| {
                            json!(e
                                .into_iter()
                                .map(|a| json!({"address": a}))
                                .collect::<Vec<_>>())
                        }),
                    ),
                ]);
                object("networking.istio.io/v1", "ServiceEntry", meta, Some(spec))
            },
        )
}

fn workload_entry() -> impl Strategy<Value = Value> {
    (
        metadata(),
        opt(select(&["10.1.2.3", "vm.internal"][..])),
        opt(labels()),
        opt(select(NAMES)),
    )
        .prop_map(|(meta, address, labels, sa)| {
            let spec = fields(vec![
                ("address", address.map(|a| json!(a))),
                ("labels", labels),
                ("serviceAccount", sa.map(|s| json!(s))),
            ]);
            object("networking.istio.io/v1", "WorkloadEntry", meta, Some(spec))
        })
}

fn workload_group() -> impl Strategy<Value = Value> {
    (metadata(), opt(labels()), opt(select(NAMES)), any::<bool>()).prop_map(
        |(meta, labels, sa, probe)| {
            let template = fields(vec![
                ("labels", labels),
                ("serviceAccount", sa.map(|s| json!(s))),
            ]);
            let spec = fields(vec![
                ("metadata", Some(json!({}))),
                ("template", Some(template)),
                ("probe", probe.then(|| json!({"httpGet": {"port": 8080}}))),
            ]);
            object("networking.istio.io/v1", "WorkloadGroup", meta, Some(spec))
        },
    )
}

fn sidecar_or_telemetry() -> impl Strategy<Value = Value> {
    (metadata(), selector(), select(&[("networking.istio.io/v1", "Sidecar"), ("telemetry.istio.io/v1", "Telemetry"), ("security.istio.io/v1", "RequestAuthentication"), ("networking.istio.io/v1", "DestinationRule"), ("networking.istio.io/v1", "VirtualService")][..]))
        .prop_map(|(meta, sel, (api, kind))| {
            let spec = match kind {
                "DestinationRule" => json!({"host": "api", "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}}}),
                "VirtualService" => json!({"hosts": ["api"], "http": [{"route": [{"destination": {"host": "api"}}]}]}),
                "Sidecar" => fields(vec![("workloadSelector", sel.map(|s| json!({"labels": s["matchLabels"].clone()})))]),
                _ => fields(vec![("selector", sel)]),
            };
            object(api, kind, meta, Some(spec))
        })
}

const HOSTS: &[&str] = &[
    "api",
    "web.payments",
    "db.web.svc.cluster.local",
    "api.example.com",
    "*.example.org",
    "",
];

/// Routes, DestinationRules and gateways of both APIs, naming hosts, subsets, ports
/// and gateways that may or may not exist.
fn traffic() -> impl Strategy<Value = Value> {
    (
        metadata(),
        select(HOSTS),
        opt(select(&["v1", "v2"][..])),
        opt(select(&[80u32, 8080][..])),
        opt(select(&["mesh", "gw", "web/gw", "payments/web", "./gw"][..])),
        opt(labels()),
        opt(select(&["DISABLE", "SIMPLE", "ISTIO_MUTUAL"][..])),
        0u8..5,
    )
        .prop_map(|(meta, host, subset, port, gateway, sel, tls, kind)| {
            let destination = fields(vec![
                ("host", Some(json!(host))),
                ("subset", subset.map(|s| json!(s))),
                ("port", port.map(|p| json!({"number": p}))),
            ]);
            match kind {
                0 => object(
                    "networking.istio.io/v1",
                    "VirtualService",
                    meta,
                    Some(fields(vec![
                        ("hosts", Some(json!([host]))),
                        ("gateways", gateway.map(|g| json!([g]))),
                        (
                            "http",
                            Some(json!([{"route": [{"destination": destination, "weight": 60}, {"destination": {"host": "api"}, "weight": 40}], "mirror": {"host": host}}])),
                        ),
                        ("tcp", Some(json!([{"route": [{"destination": destination}]}]))),
                    ])),
                ),
                1 => object(
                    "networking.istio.io/v1",
                    "DestinationRule",
                    meta,
                    Some(fields(vec![
                        ("host", Some(json!(host))),
                        ("subsets", Some(json!([{"name": subset.unwrap_or("v1"), "labels": sel.clone().unwrap_or(json!({}))}]))),
                        ("trafficPolicy", tls.map(|m| json!({"tls": {"mode": m}, "portLevelSettings": [{"port": {"number": port.unwrap_or(80)}, "tls": {"mode": m}}]}))),
                    ])),
                ),
                2 => object(
                    "networking.istio.io/v1",
                    "Gateway",
                    meta,
                    Some(fields(vec![
                        ("selector", sel),
                        ("servers", Some(json!([{"port": {"number": port.unwrap_or(443), "protocol": if tls.is_some() { "HTTPS" } else { "HTTP" }}, "hosts": [host], "tls": tls.map(|_| json!({"mode": "SIMPLE"}))}]))),
                    ])),
                ),
                3 => object(
                    "gateway.networking.k8s.io/v1",
                    "Gateway",
                    meta,
                    Some(json!({"gatewayClassName": "istio", "listeners": [{"name": "http", "port": port.unwrap_or(80), "protocol": "HTTP", "hostname": host, "allowedRoutes": {"namespaces": {"from": if gateway.is_some() { "All" } else { "Selector" }, "selector": {"matchLabels": sel.clone().unwrap_or(json!({}))}}}}]})),
                ),
                _ => object(
                    "gateway.networking.k8s.io/v1",
                    "HTTPRoute",
                    meta,
                    Some(fields(vec![
                        ("parentRefs", Some(json!([{"name": "web", "namespace": gateway.map(|_| "payments"), "sectionName": subset, "port": port}]))),
                        ("hostnames", Some(json!([host]))),
                        ("rules", Some(json!([{"backendRefs": [{"name": "api", "namespace": gateway.map(|_| "web"), "port": port}, {"kind": subset.map(|_| "Bucket"), "group": subset.map(|_| "example.com"), "name": "db"}]}]))),
                    ])),
                ),
            }
        })
}

fn any_object() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => namespace(),
        4 => workload(),
        3 => peer_authentication(),
        4 => authorization_policy(),
        2 => service(),
        2 => service_entry(),
        1 => workload_entry(),
        1 => workload_group(),
        1 => sidecar_or_telemetry(),
        3 => traffic(),
    ]
}

/// Objects spread over files (JSON is YAML); the same object may sit in two files.
fn tree(objects: &[(Value, u8)]) -> Tree {
    let mut files: std::collections::BTreeMap<String, String> = Default::default();
    for (o, file) in objects {
        let text = files.entry(format!("apps/f{file}.yaml")).or_default();
        text.push_str("---\n");
        text.push_str(&o.to_string());
        text.push('\n');
    }
    Tree {
        files: files
            .into_iter()
            .map(|(path, text)| SourceFile {
                path,
                bytes: text.into_bytes(),
            })
            .collect(),
        ..Tree::default()
    }
}

fn policy_errors(report: &meshward::report::Report) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| f.rule == "policy/error")
        .map(|f| format!("{}: {}", f.file, f.message))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn built_in_policies_run_to_the_end_on_any_valid_model(
        objects in prop::collection::vec((any_object(), 0u8..3, any::<bool>(), any::<bool>()), 0..24),
    ) {
        let base: Vec<(Value, u8)> = objects.iter().filter(|o| o.2).map(|o| (o.0.clone(), o.1)).collect();
        let head: Vec<(Value, u8)> = objects.iter().filter(|o| o.3).map(|o| (o.0.clone(), o.1)).collect();
        let (base, head) = (tree(&base), tree(&head));
        let opts = Options::new(chrono::NaiveDate::from_ymd_opt(2026, 11, 30).expect("date"));
        let alone = analyze(None, Revision { label: "head".into(), tree: &head }, &opts)
            .expect("a check of generated objects runs");
        prop_assert!(policy_errors(&alone).is_empty(), "{:#?}", policy_errors(&alone));
        let change = analyze(
            Some(Revision { label: "base".into(), tree: &base }),
            Revision { label: "head".into(), tree: &head },
            &opts,
        )
        .expect("a check of generated objects runs");
        prop_assert!(policy_errors(&change).is_empty(), "{:#?}", policy_errors(&change));
    }
}

/// The crash users met: two roots (here: two files) deploying one workload took the
/// authz rules down, and the run still passed.
#[test]
fn one_workload_deployed_twice_is_checked_by_every_policy() {
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "podinfo", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "podinfo"}}, "template": {"metadata": {"labels": {"app": "podinfo"}}, "spec": {"serviceAccountName": "podinfo", "containers": [{"name": "c", "image": "x"}]}}}});
    let mut other = deployment.clone();
    other["spec"]["template"]["spec"]["serviceAccountName"] = json!("other");
    let base = tree(&[(deployment.clone(), 0), (other.clone(), 1)]);
    let mut changed = other;
    changed["spec"]["template"]["spec"]["serviceAccountName"] = json!("third");
    let head = tree(&[(deployment, 0), (changed, 1)]);
    let opts = Options::new(chrono::NaiveDate::from_ymd_opt(2026, 11, 30).expect("date"));
    let report = analyze(
        Some(Revision {
            label: "base".into(),
            tree: &base,
        }),
        Revision {
            label: "head".into(),
            tree: &head,
        },
        &opts,
    )
    .expect("check runs");
    assert!(
        policy_errors(&report).is_empty(),
        "{:#?}",
        policy_errors(&report)
    );
    assert!(report
        .findings
        .iter()
        .any(|f| f.rule == "manifest/duplicate-resource"));
}
