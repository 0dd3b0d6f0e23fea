//! The "What this change does to the mesh" section of the markdown report: proxy
//! cost, data planes, AuthorizationPolicy enforcement, new hops, identities, VM
//! bootstrap and selections. A function of its own so
//! that other sections and the PR comment can place it.

use super::cell;
use crate::changes::{Change, Changes, RouteShares, SelectorChange, Share};
use crate::units::quantity::{bytes_text, cores_text, signed_text};
use std::fmt::Write;

/// Rows per table; the rest are counted and left to the JSON report.
const MAX_ROWS: usize = 25;

/// `Kind/ns/name` as inline code, safe in a table cell.
fn code(s: &str) -> String {
    format!("`{}`", cell(&s.replace('`', "'")))
}

fn codes(ids: &[String], max: usize) -> String {
    if ids.is_empty() {
        return "—".into();
    }
    let mut parts: Vec<String> = ids.iter().take(max).map(|s| code(s)).collect();
    if ids.len() > max {
        parts.push(format!("and {} more", ids.len() - max));
    }
    parts.join(", ")
}

fn more(out: &mut String, total: usize) {
    if total > MAX_ROWS {
        let _ = writeln!(
            out,
            "\n…and {} more (all of them are in `--format json`, under `changes`).",
            total - MAX_ROWS
        );
    }
}

fn labels_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "(no labels)".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A group's labels without the canonical-service ones istioctl adds.
fn own_labels(
    labels: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| !k.starts_with("service.istio.io/canonical-"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A shell-quoted value, as istioctl writes cluster.env.
fn shell_quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\"'\"'"))
}

/// A code fence longer than any run of backticks in the text.
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// The section, or an empty string when the change touches none of it.
pub fn section(c: &Changes) -> String {
    if c.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(out, "### What this change does to the mesh\n");
    proxy_cost(&mut out, c);
    dataplanes(&mut out, c);
    enforcement(&mut out, c);
    latency(&mut out, c);
    identities(&mut out, c);
    vm_bootstrap(&mut out, c);
    selectors(&mut out, c);
    routes(&mut out, c);
    out
}

fn proxy_cost(out: &mut String, c: &Changes) {
    let p = &c.proxy_cost;
    let Some(summary) = &p.summary else {
        return;
    };
    let _ = writeln!(
        out,
        "**Proxy cost:** {} (each proxy requests its pod's `sidecar.istio.io/proxyCPU` / `proxyMemory`, else {} CPU / {}; HPA maxReplicas counted where an HPA scales the workload).\n",
        cell(summary),
        cell(&p.default_cpu),
        cell(&p.default_memory)
    );
    if !p.workloads.is_empty() {
        let _ = writeln!(
            out,
            "| Workload | Proxies | CPU | Memory | Why |\n|---|---|---|---|---|"
        );
        for w in p.workloads.iter().take(MAX_ROWS) {
            let hpa = match &w.autoscaler {
                Some(_) => " (HPA max)",
                None => "",
            };
            let mut why = w.reason.clone();
            for problem in &w.problems {
                why.push_str(&format!(" ⚠️ {problem}"));
            }
            let _ = writeln!(
                out,
                "| {} | {} → {}{hpa} | {} | {} | {} |",
                code(&w.workload),
                w.base_proxies,
                w.head_proxies,
                signed_text(w.cpu_millicores, cores_text(w.cpu_millicores)),
                signed_text(w.memory_bytes, bytes_text(w.memory_bytes)),
                cell(&why)
            );
        }
        more(out, p.workloads.len());
        out.push('\n');
    }
    for u in &p.uncounted {
        let _ = writeln!(
            out,
            "- {} not counted: {}",
            code(&u.workload),
            cell(&u.reason)
        );
    }
    if !p.uncounted.is_empty() {
        out.push('\n');
    }
}

fn dataplanes(out: &mut String, c: &Changes) {
    if c.dataplanes.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "**Data planes** this change moves workloads between (a sidecar enforces every rule; ztunnel, in ambient, enforces mTLS and L4 rules only; a waypoint adds HTTP rules for traffic addressed to the workload):\n"
    );
    let _ = writeln!(
        out,
        "| Workload | Data plane (base → head) | What happens |\n|---|---|---|"
    );
    for d in c.dataplanes.iter().take(MAX_ROWS) {
        let mut head = d.head_label();
        if !d.head_waypoints.is_empty() {
            head.push_str(&format!(" ({})", codes(&d.head_waypoints, 2)));
        }
        let _ = writeln!(
            out,
            "| {} | {} → {} | {} |",
            code(&d.workload),
            d.base_label(),
            head,
            cell(&d.reason)
        );
    }
    more(out, c.dataplanes.len());
    out.push('\n');
}

fn enforcement(out: &mut String, c: &Changes) {
    if c.authz_enforcement.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "**AuthorizationPolicy enforcement** this change moves (ztunnel sees no HTTP: it drops or narrows rules with HTTP fields):\n"
    );
    let _ = writeln!(
        out,
        "| AuthorizationPolicy | Enforcement (base → head) | What happens |\n|---|---|---|"
    );
    for e in c.authz_enforcement.iter().take(MAX_ROWS) {
        let warn = if e.head == crate::model::coverage::Enforcement::AsWritten {
            ""
        } else {
            " ⚠️"
        };
        let _ = writeln!(
            out,
            "| {} | {} → {}{warn} | {} |",
            code(&e.policy),
            e.base.map_or("new or selecting nothing", |b| b.text()),
            e.head.text(),
            cell(&e.why)
        );
    }
    more(out, c.authz_enforcement.len());
    out.push('\n');
}

fn latency(out: &mut String, c: &Changes) {
    if c.latency.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "**New hops:** after this change both ends of these calls run a proxy where before at most one did, so each call passes two proxies (the caller's outbound and the callee's inbound), adding latency to every request. Who calls whom is read from Service host names in the caller's env, args and command, and from AuthorizationPolicies that allow the caller:\n"
    );
    for h in c.latency.iter().take(MAX_ROWS) {
        let _ = writeln!(
            out,
            "- {} → {}: {} → {} proxies per call; decided from {}",
            code(&h.caller),
            code(&h.callee),
            h.proxies_before,
            h.proxies_after,
            cell(&h.decided_by.join("; "))
        );
    }
    more(out, c.latency.len());
    out.push('\n');
}

fn identities(out: &mut String, c: &Changes) {
    if c.identities.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "**Identities** of the workloads this change adds or changes, and the AuthorizationPolicies whose sources name them:\n"
    );
    let _ = writeln!(
        out,
        "| Workload | Identity | Allowed by | Denied by |\n|---|---|---|---|"
    );
    for i in c.identities.iter().take(MAX_ROWS) {
        let mut identity = code(&i.spiffe_id);
        if let Some(old) = &i.base_service_account {
            identity.push_str(&format!(
                "<br>service account {} → {}",
                code(old),
                code(&i.service_account)
            ));
        }
        if !i.proxy {
            identity.push_str("<br>no proxy: presents no identity, its calls are plaintext");
        }
        let mut allowed = codes(&i.allowed_by, 5);
        if i.base_service_account.is_some() && i.base_allowed_by != i.allowed_by {
            allowed.push_str(&format!("<br>before: {}", codes(&i.base_allowed_by, 5)));
        }
        let _ = writeln!(
            out,
            "| {} ({}) | {} | {} | {} |",
            code(&i.subject),
            i.change.as_str(),
            identity,
            allowed,
            codes(&i.denied_by, 5)
        );
    }
    more(out, c.identities.len());
    out.push('\n');
}

fn vm_bootstrap(out: &mut String, c: &Changes) {
    for v in c.vm_bootstrap.iter().take(MAX_ROWS) {
        let _ = writeln!(
            out,
            "**VM bootstrap: {}** ({}). A VM registered from it starts with:\n",
            code(&v.workload_group),
            v.change.as_str()
        );
        let env: String = v
            .cluster_env
            .iter()
            .map(|(k, val)| format!("{k}={}\n", shell_quote(val)))
            .collect();
        let fence = fence_for(&env);
        let _ = writeln!(
            out,
            "{fence}sh\n# cluster.env: the keys that come from the group\n{env}{fence}\n"
        );
        let _ = writeln!(
            out,
            "- identity {}; token for service account {} (audience `{}`)",
            code(&v.spiffe_id),
            code(&format!(
                "{}/{}",
                v.token.namespace, v.token.service_account
            )),
            cell(&v.token.audience)
        );
        let _ = writeln!(
            out,
            "- root certificate: ConfigMap {} in namespace {} (key `{}`)",
            code(&v.root_cert.config_map),
            code(&v.root_cert.namespace),
            cell(&v.root_cert.key)
        );
        let selected = match (v.service_entry_count, v.services.is_empty()) {
            (0, true) => format!(
                "⚠️ no ServiceEntry selects its labels ({}): its VMs get no name to be called by (`workloadgroup/unreachable`)",
                cell(&labels_text(&own_labels(&v.labels)))
            ),
            (0, false) => format!(
                "no ServiceEntry selects its labels; Kubernetes Services do: {}",
                codes(&v.services, 5)
            ),
            (n, _) => format!(
                "selected by {n} ServiceEntr{}: {}",
                if n == 1 { "y" } else { "ies" },
                codes(&v.service_entries, 5)
            ),
        };
        let _ = writeln!(out, "- {selected}");
        for n in &v.notes {
            let _ = writeln!(out, "- {}", cell(n));
        }
        out.push('\n');
    }
    more(out, c.vm_bootstrap.len());
}

fn counts_text(s: &SelectorChange) -> String {
    let now = s.head.total();
    let text = match &s.base {
        Some(b) => format!("{} → {}", b.total(), now),
        None => format!("new → {now}"),
    };
    if now == 0 {
        format!("{text} ⚠️")
    } else {
        text
    }
}

fn selectors(out: &mut String, c: &Changes) {
    if c.selectors.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "**Selectors** this change adds or changes, or whose selection it moves (policies count workloads with a proxy and WorkloadEntries; ServiceEntries count workloads, WorkloadEntries and WorkloadGroups):\n"
    );
    let _ = writeln!(
        out,
        "| Selector | Labels | Selects (base → head) | Change |\n|---|---|---|---|"
    );
    for s in c.selectors.iter().take(MAX_ROWS) {
        let labels = match &s.labels {
            Some(l) => code(&labels_text(l)),
            None => format!("({}-wide)", s.scope),
        };
        let mut change = s.change.as_str().to_string();
        if !s.lost.is_empty() {
            change.push_str(&format!("; no longer selects {}", codes(&s.lost, 3)));
        }
        if !s.gained.is_empty() && s.change != Change::Added {
            change.push_str(&format!("; now selects {}", codes(&s.gained, 3)));
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            code(&s.resource),
            labels,
            counts_text(s),
            change
        );
    }
    more(out, c.selectors.len());
    out.push('\n');
}

/// `90% reviews v1 (2 pods)`, `10% reviews v3 ⚠️ no DestinationRule defines the subset`.
fn share_text(s: &Share) -> String {
    let subset = s
        .subset
        .as_deref()
        .map(|x| format!(" {x}"))
        .unwrap_or_default();
    let what = match s.outcome.as_str() {
        "reaches" => match s.pods {
            Some(n) => format!(" ({n} {})", if n == 1 { "workload" } else { "workloads" }),
            None => String::new(),
        },
        "no-such-host" => " ⚠️ no such host".into(),
        "no-such-port" => " ⚠️ the host has no such port".into(),
        "no-such-subset" => " ⚠️ no DestinationRule defines the subset".into(),
        "no-pods" => " ⚠️ the subset selects no pod".into(),
        _ => " (not checked)".into(),
    };
    format!(
        "{}% `{}`{subset}{what}",
        s.percent,
        cell(&s.host.replace('`', "'"))
    )
}

fn reaching_text(s: &RouteShares) -> String {
    match s.reaching {
        Some(p) => format!("{p}%"),
        None => "not checked".into(),
    }
}

fn routes(out: &mut String, c: &Changes) {
    if c.routes.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "**Routes** this change adds or changes, or whose destinations it moves (each rule's traffic by weight, and the share that reaches pods):\n"
    );
    let _ = writeln!(
        out,
        "| Route | Rule | Sends (head) | Reaches pods (base → head) | Change |\n|---|---|---|---|---|"
    );
    for r in c.routes.iter().take(MAX_ROWS) {
        let sends: Vec<String> = r.head.destinations.iter().map(share_text).collect();
        let now = reaching_text(&r.head);
        let mut reach = match &r.base {
            Some(b) => format!("{} → {now}", reaching_text(b)),
            None => format!("new → {now}"),
        };
        if r.head.reaching.is_some_and(|p| p < 100) {
            reach.push_str(" ⚠️");
        }
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} |",
            code(&r.resource),
            r.rule,
            sends.join("; "),
            reach,
            r.change.as_str()
        );
    }
    more(out, c.routes.len());
    out.push('\n');
}
