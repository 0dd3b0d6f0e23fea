use super::assemble::*;
use super::http::*;
use super::*;

fn source(url: Option<&str>, allowed: &[&str], from_repo: bool) -> PrometheusSource {
    PrometheusSource::new(SourceSettings {
        url: url.map(str::to_string),
        allowed_urls: allowed.iter().map(|s| s.to_string()).collect(),
        url_from_repo: from_repo,
        ..SourceSettings::default()
    })
}

fn repo(url: Option<&str>, window: Option<&str>) -> PrometheusConfig {
    PrometheusConfig {
        url: url.map(str::to_string),
        window: window.map(str::to_string),
        ..PrometheusConfig::default()
    }
}

#[test]
fn nothing_configured_means_no_source() {
    assert!(source(None, &[], true).resolve(None).is_none());
    assert!(source(None, &[], true)
        .resolve(Some(&repo(None, Some("1d"))))
        .is_none());
}

#[test]
fn the_repository_may_only_name_allowed_servers() {
    let s = source(Some("https://prom.a"), &["https://prom.b/sub/"], true);
    let t = s.resolve(None).unwrap().unwrap();
    assert_eq!(t.url.as_str(), "https://prom.a/");
    assert_eq!(t.window, "7d");
    let t = s
        .resolve(Some(&repo(Some("https://prom.b/sub"), Some("1d"))))
        .unwrap()
        .unwrap();
    assert_eq!(t.url.as_str(), "https://prom.b/sub/");
    assert_eq!(t.window_len, Duration::from_secs(86400));
    // A look-alike host is not a prefix match.
    let e = s
        .resolve(Some(&repo(Some("https://prom.a.evil.example"), None)))
        .unwrap()
        .unwrap_err();
    assert!(e.contains("does not allow"), "{e}");
    assert!(e.contains("MESHWARD_PROMETHEUS_ALLOWED_URLS"), "{e}");
}

#[test]
fn the_cli_flag_wins_over_the_repository() {
    let mut s = source(Some("http://127.0.0.1:9090"), &[], false);
    s.settings.window_override = Some("2h".into());
    let t = s
        .resolve(Some(&repo(Some("https://elsewhere"), Some("30d"))))
        .unwrap()
        .unwrap();
    assert_eq!(t.url.as_str(), "http://127.0.0.1:9090/");
    assert_eq!(t.window, "2h");
}

#[test]
fn urls_with_credentials_or_other_schemes_are_refused() {
    assert!(check_url("https://user:pw@prom")
        .unwrap_err()
        .contains("credentials"));
    assert!(check_url("file:///etc/passwd").is_err());
    assert!(check_url("https://prom/?x=1").is_err());
    assert_eq!(
        check_url("https://prom/api").unwrap().as_str(),
        "https://prom/api/"
    );
}

#[test]
fn vector_sums_and_refuses_nonsense() {
    let v = serde_json::json!({"resultType": "vector", "result": [
            {"metric": {}, "value": [1.0, "2.5"]}, {"metric": {}, "value": [1.0, "3"]}]});
    assert_eq!(vector_sum(&v).unwrap(), 5.5);
    let empty = serde_json::json!({"resultType": "vector", "result": []});
    assert_eq!(vector_sum(&empty).unwrap(), 0.0);
    let nan = serde_json::json!({"resultType": "vector", "result": [{"value": [1.0, "NaN"]}]});
    assert!(vector_sum(&nan).is_err());
    assert!(vector_sum(&serde_json::json!({"resultType": "matrix", "result": []})).is_err());
}

#[test]
fn plaintext_rounds_up_totals_round() {
    let scope = StrictScope {
        resource: "PeerAuthentication/shop/default".into(),
        scope: "namespace".into(),
        scope_key: "namespace:shop".into(),
        namespace: "shop".into(),
        subject: Subject::Namespaces(vec!["shop".into()]),
        strict_ports: vec![],
    };
    let subjects = subjects_for(&[scope], &BTreeMap::new(), "1h");
    let mut answers = HashMap::new();
    for (name, q) in &subjects[0].queries {
        let value = if name.ends_with("plaintext") {
            0.4
        } else {
            99.6
        };
        answers.insert(
            q.clone(),
            Cached {
                at: Instant::now(),
                taken_at: "t".into(),
                value,
            },
        );
    }
    let mut e = Evidence {
        taken_at: Some("t".into()),
        ..Evidence::default()
    };
    fill(&mut e, &subjects, &answers, &BTreeMap::new());
    let shop = &e.namespaces["shop"];
    assert_eq!((shop.requests_plaintext, shop.requests_total), (1, 100));
    assert_eq!(shop.taken_at, None);
}
