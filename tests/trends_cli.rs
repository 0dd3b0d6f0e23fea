//! `meshward trends`: the real binary on a seeded store. Output snapshots on the
//! embedded SQLite file; the same command on PostgreSQL prints the same bytes.

use crate::service_support;

use assert_cmd::Command;
use meshward::store::Store;
use service_support::seed;

const RANGE: [&str; 4] = ["--from", "2026-11-01", "--to", "2026-11-08"];

/// A seeded SQLite store in a temp folder (`meshward.db`, as `serve` makes it).
async fn seeded_sqlite() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open_sqlite(&dir.path().join("meshward.db"))
        .await
        .expect("sqlite");
    store.migrate().await.expect("migrate");
    seed::history(&store).await;
    seed::fleet(&store).await;
    store.close().await;
    dir
}

fn trends(db: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::cargo_bin("meshward").expect("binary");
    cmd.arg("trends").args(args).env_remove("DATABASE_URL");
    for (k, v) in db {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--repo", "acme/gitops"];
    v.extend(RANGE);
    v.extend_from_slice(extra);
    v
}

#[tokio::test]
async fn table_csv_and_json_from_the_embedded_store() {
    let dir = seeded_sqlite().await;
    let data_dir = dir.path().to_str().unwrap();
    let db = [("MESHWARD_DATA_DIR", data_dir)];

    let (code, table, err) = trends(&db, &args(&[]));
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("trends_table", table);

    let (code, ns, err) = trends(&db, &args(&["--namespace", "shop"]));
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("trends_table_namespace", ns);

    let (code, csv, err) = trends(&db, &args(&["--format", "csv"]));
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("trends_csv", csv);

    let (code, json, err) = trends(&db, &args(&["--format", "json", "--interval", "week"]));
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("trends_json_week", json);
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["interval"], "week");
}

#[tokio::test]
async fn cluster_selects_one_clusters_series_and_the_output_lists_them() {
    let dir = seeded_sqlite().await;
    let db = [("MESHWARD_DATA_DIR", dir.path().to_str().unwrap())];
    let fleet = |extra: &[&'static str]| {
        let mut v = vec![
            "--repo",
            "acme/fleet",
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-04",
        ];
        v.extend_from_slice(extra);
        v
    };

    let (code, whole, err) = trends(&db, &fleet(&[]));
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("trends_table_clusters", whole);

    let (code, eu, err) = trends(&db, &fleet(&["--cluster", "prod-eu"]));
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("trends_table_cluster", eu);

    let (code, json, err) = trends(
        &db,
        &fleet(&[
            "--cluster",
            "prod-us",
            "--namespace",
            "shop",
            "--format",
            "json",
        ]),
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        (&v["cluster"], &v["namespace"]),
        (&"prod-us".into(), &"shop".into())
    );
    assert_eq!(v["clusters"], serde_json::json!(["prod-eu", "prod-us"]));
    let proxies: Vec<Option<i64>> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metrics"]["workloads_with_proxy"].as_i64())
        .collect();
    assert_eq!(proxies, [None, Some(1), Some(3)]);

    // A repository with one cluster says nothing about clusters.
    let (_, one, _) = trends(&db, &args(&[]));
    assert!(!one.contains("cluster"), "{one}");

    let (code, out, err) = trends(&db, &fleet(&["--cluster", "prod-ap"]));
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.contains(
            "--cluster: no run of acme/fleet names a cluster `prod-ap`; its clusters: prod-eu, prod-us"
        ),
        "{err}"
    );
    let (code, _, err) = trends(&db, &fleet(&["--cluster", "prod\teu"]));
    assert_eq!(code, 2);
    assert!(
        err.contains("--cluster: `prod?eu` is not a cluster name"),
        "{err}"
    );
}

#[tokio::test]
async fn errors_name_the_flag_or_the_store_and_exit_2() {
    let dir = seeded_sqlite().await;
    let data_dir = dir.path().to_str().unwrap();
    let db = [("MESHWARD_DATA_DIR", data_dir)];
    let (code, out, err) = trends(&db, &["--repo", "acme/nothing"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("no history for acme/nothing"), "{err}");

    let (code, _, err) = trends(&db, &["--repo", "acme/gitops", "--from", "last tuesday"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--from: `last tuesday` is not a time"),
        "{err}"
    );

    let empty = tempfile::tempdir().unwrap();
    let (code, _, err) = trends(
        &[("MESHWARD_DATA_DIR", empty.path().to_str().unwrap())],
        &["--repo", "acme/gitops"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("no database at"), "{err}");
    assert!(
        !empty.path().join("meshward.db").exists(),
        "a read-only tool creates no database"
    );
}

/// The same command against PostgreSQL (the seeded test database) prints exactly
/// what it prints on SQLite.
#[sqlx::test(migrations = false)]
async fn postgres_prints_what_sqlite_prints(pool: sqlx::PgPool) {
    let store = Store::from_pg(pool.clone());
    store.migrate().await.expect("migrate");
    seed::history(&store).await;
    seed::fleet(&store).await;
    let db: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&pool)
        .await
        .expect("database name");
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let url = match base.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{db}"),
        None => panic!("DATABASE_URL without a database: {base}"),
    };
    let dir = seeded_sqlite().await;
    let fleet = [
        "--repo",
        "acme/fleet",
        "--format",
        "json",
        "--from",
        "2026-11-01",
        "--to",
        "2026-11-04",
    ];
    let cases: [Vec<&str>; 4] = [
        args(&[]),
        args(&["--format", "csv", "--namespace", "pay"]),
        [&fleet[..], &["--cluster", "prod-us"]].concat(),
        [&fleet[..], &["--namespace", "shop"]].concat(),
    ];
    for case in cases {
        let (code, pg, err) = trends(&[("DATABASE_URL", &url)], &case);
        assert_eq!(code, 0, "{err}");
        let (_, lite, _) = trends(
            &[("MESHWARD_DATA_DIR", dir.path().to_str().unwrap())],
            &case,
        );
        assert_eq!(pg, lite, "{case:?}");
    }
}
