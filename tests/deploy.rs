//! deploy/: the Kubernetes manifests render, pass meshward's own checks, and the
//! binary starts exactly as the Deployment starts it (same args, same env names)
//! against PostgreSQL and answers /readyz.

use assert_cmd::Command;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn deploy_manifests_check_clean() {
    Command::cargo_bin("meshward")
        .expect("binary")
        .arg("check")
        .arg(root().join("deploy"))
        .args(["--fail-on", "warning", "--format", "json"])
        .assert()
        .code(0);
}

#[test]
fn github_app_manifest_asks_for_the_least_permissions() {
    let text = std::fs::read_to_string(root().join("deploy/github-app.yml")).expect("manifest");
    let m: Json = yaml_serde::from_str(&text).expect("yaml");
    let perms = m["default_permissions"].as_object().expect("permissions");
    let mut got: Vec<(String, String)> = perms
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
        .collect();
    got.sort();
    let want = [
        ("checks", "write"),
        ("contents", "read"),
        ("metadata", "read"),
        ("pull_requests", "write"),
        ("statuses", "write"),
    ];
    assert_eq!(
        got,
        want.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    let events: Vec<&str> = m["default_events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(Json::as_str)
        .collect();
    for e in ["pull_request", "push", "check_run", "check_suite"] {
        assert!(events.contains(&e), "missing event {e}");
    }
}

fn docs(path: &str) -> Vec<Json> {
    let text = std::fs::read_to_string(root().join(path)).expect("manifest");
    text.split("\n---")
        .filter_map(|d| yaml_serde::from_str::<Json>(d).ok())
        .filter(|d| d.is_object())
        .collect()
}

/// Starts the binary with the Deployment's args and env names: values from the
/// ConfigMap, secrets from the test, the listen address on a free loopback port.
/// Under scripts/test (and CI) this is the release binary, as the image ships it.
#[tokio::test(flavor = "multi_thread")]
async fn binary_starts_as_the_deployment_does_and_is_ready() {
    let deployment = docs("deploy/kubernetes/deployment.yaml").remove(0);
    let config = docs("deploy/kubernetes/configmap.yaml").remove(0);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();

    let admin_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = format!("meshward_deploy_{}", std::process::id());
    let admin = sqlx::PgPool::connect(&admin_url)
        .await
        .expect("PostgreSQL reachable (DATABASE_URL)");
    sqlx::query(&format!("DROP DATABASE IF EXISTS {db}"))
        .execute(&admin)
        .await
        .expect("drop");
    sqlx::query(&format!("CREATE DATABASE {db}"))
        .execute(&admin)
        .await
        .expect("create");
    let db_url = match admin_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{db}"),
        None => panic!("DATABASE_URL without a database: {admin_url}"),
    };

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    let mut env: BTreeMap<String, String> = config["data"]
        .as_object()
        .expect("configmap data")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    env.insert("MESHWARD_LISTEN".into(), format!("127.0.0.1:{port}"));
    env.insert(
        "MESHWARD_GITHUB_PRIVATE_KEY_PATH".into(),
        root()
            .join("tests/fixtures/github/test-app-key.pem")
            .display()
            .to_string(),
    );
    let secrets: BTreeMap<&str, String> = [
        ("DATABASE_URL", db_url.clone()),
        ("MESHWARD_WEBHOOK_SECRET", "deploy-test-secret".to_string()),
        ("MESHWARD_GITHUB_APP_ID", "12345".to_string()),
        ("MESHWARD_API_TOKENS", "deploy-test-token".to_string()),
        (
            "MESHWARD_PROMETHEUS_BEARER_TOKEN",
            "deploy-test-prometheus-token".to_string(),
        ),
        ("TMPDIR", std::env::temp_dir().display().to_string()),
    ]
    .into();
    for e in container["env"].as_array().expect("env") {
        let name = e["name"].as_str().expect("env name");
        let value = secrets
            .get(name)
            .unwrap_or_else(|| panic!("the test has no value for the Deployment's env {name}"));
        env.insert(name.to_string(), value.clone());
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_meshward"))
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(&env)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start meshward");

    let url = format!("http://127.0.0.1:{port}/readyz");
    let client = reqwest::Client::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut last;
    let ready = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Err(format!("meshward exited early: {status}"));
        }
        match client.get(&url).send().await {
            Ok(r) if r.status().is_success() => break Ok(()),
            Ok(r) => last = format!("{}", r.status()),
            Err(e) => last = e.to_string(),
        }
        if std::time::Instant::now() > deadline {
            break Err(format!("not ready within 60 s: {last}"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    sqlx::query(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .execute(&admin)
        .await
        .ok();
    ready.expect("ready");
}

fn seconds(duration: &str) -> u64 {
    let d = duration.trim();
    if let Some(m) = d.strip_suffix('m') {
        return m.parse::<u64>().expect("minutes") * 60;
    }
    d.trim_end_matches('s').parse().expect("seconds")
}

/// A rollout drops no webhook and loses no job: the pod leaves the endpoints during
/// the preStop sleep, meshward then gets its shutdown grace, the sidecar keeps
/// serving until meshward is done, and the kubelet waits for all of it.
#[test]
fn shutdown_fits_in_the_grace_period() {
    let deployment = docs("deploy/kubernetes/deployment.yaml").remove(0);
    let config = docs("deploy/kubernetes/configmap.yaml").remove(0);
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let sleep = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .expect("lifecycle.preStop.sleep.seconds (no shell in the image for an exec sleep)");
    let grace_period = pod["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    let shutdown_grace: u64 = config["data"]["MESHWARD_SHUTDOWN_GRACE_SECS"]
        .as_str()
        .expect("MESHWARD_SHUTDOWN_GRACE_SECS in the ConfigMap")
        .parse()
        .expect("a number");
    let proxy: Json = yaml_serde::from_str(
        pod["metadata"]["annotations"]["proxy.istio.io/config"]
            .as_str()
            .expect("proxy.istio.io/config annotation"),
    )
    .expect("proxy config YAML");
    let drain = seconds(
        proxy["terminationDrainDuration"]
            .as_str()
            .expect("terminationDrainDuration"),
    );
    assert_eq!(
        proxy["holdApplicationUntilProxyStarts"], true,
        "serve connects to PostgreSQL at start: it must wait for its proxy"
    );
    // A few seconds to give unfinished jobs back and close the pool.
    let release = 5;
    assert!(
        sleep >= 5,
        "preStop sleep {sleep}s: too short for endpoints to update"
    );
    assert!(
        sleep + shutdown_grace + release <= drain,
        "sidecar drains {drain}s, meshward needs {sleep}+{shutdown_grace}+{release}s"
    );
    assert!(
        drain <= grace_period,
        "terminationGracePeriodSeconds {grace_period} < sidecar drain {drain}s"
    );
}

/// The namespace gets sidecars, so the NetworkPolicy lets them reach istiod; every
/// egress rule names its destination; ingress is the container's port only.
#[test]
fn network_policy_fits_the_sidecar_and_names_destinations() {
    let namespace = docs("deploy/kubernetes/namespace.yaml").remove(0);
    assert_eq!(
        namespace["metadata"]["labels"]["istio-injection"], "enabled",
        "this test assumes sidecar injection"
    );
    let policy = docs("deploy/kubernetes/networkpolicy.yaml").remove(0);
    let egress = policy["spec"]["egress"].as_array().expect("egress");
    for rule in egress {
        assert!(
            rule["to"].as_array().is_some_and(|to| !to.is_empty()),
            "egress rule without a destination: {rule}"
        );
    }
    let to_istiod = egress.iter().any(|rule| {
        let port = rule["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["port"] == 15012 && p["protocol"] == "TCP");
        let peer = rule["to"].as_array().into_iter().flatten().any(|peer| {
            peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                == "istio-system"
                && peer["podSelector"]["matchLabels"]["app"] == "istiod"
        });
        port && peer
    });
    assert!(
        to_istiod,
        "no egress to istiod (istio-system, app: istiod) on 15012"
    );

    let deployment = docs("deploy/kubernetes/deployment.yaml").remove(0);
    let port = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    let ingress_ports: Vec<&Json> = policy["spec"]["ingress"]
        .as_array()
        .expect("ingress")
        .iter()
        .flat_map(|r| r["ports"].as_array().into_iter().flatten())
        .map(|p| &p["port"])
        .collect();
    assert_eq!(ingress_ports, [&port["containerPort"]]);
}

/// The README's advice is in the ConfigMap, with a placeholder to replace.
#[test]
fn configmap_names_the_app_slug() {
    let config = docs("deploy/kubernetes/configmap.yaml").remove(0);
    let slug = config["data"]["MESHWARD_GITHUB_APP_SLUG"]
        .as_str()
        .expect("MESHWARD_GITHUB_APP_SLUG in the ConfigMap");
    assert!(!slug.is_empty());
}
