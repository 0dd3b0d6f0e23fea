//! meshward reads YAML as kubectl does: a differential test against the real kubectl
//! (scripts/install-tools puts it in .tools/bin) over the edge cases in
//! tests/fixtures/yaml/. For every document of every case, either both accept it and
//! give the same object, or both reject it and meshward's parse error is at the line
//! kubectl names.
//!
//! kubectl runs offline: `kubectl patch --local` reads files through the same
//! decoder as `apply` and `create` (k8s.io/apimachinery's YAMLOrJSONDecoder: cut at
//! `---` lines, go-yaml v2, sigs.k8s.io/yaml) and prints the objects, with no server.

use meshward::yaml::{parse_documents, Document, Limits};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/yaml")
}

/// kubectl as meshward finds it: `MESHWARD_KUBECTL`, the project's `.tools/bin`, PATH.
fn kubectl() -> PathBuf {
    let mut candidates: Vec<PathBuf> = std::env::var_os("MESHWARD_KUBECTL")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/kubectl"));
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("kubectl")));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .expect("kubectl not found (MESHWARD_KUBECTL, .tools/bin, PATH): run scripts/install-tools")
}

/// What kubectl made of a file.
#[derive(Debug)]
enum Read {
    Objects(Vec<Json>),
    Rejected(String),
}

fn kubectl_read(kubectl: &Path, file: &Path) -> Read {
    let home = tempfile::tempdir().expect("tempdir");
    let out = Command::new(kubectl)
        .args([
            "patch", "--local", "--type", "merge", "-p", "{}", "-o", "json", "-f",
        ])
        .arg(file)
        // No cluster and no user config: the file alone decides.
        .env("KUBECONFIG", home.path().join("none"))
        .env("HOME", home.path())
        .output()
        .expect("kubectl runs");
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    // A document with nothing in it (blank, comments, `~`) is skipped, and patch
    // says so when that is all there was.
    if stderr.contains("no objects passed to patch") {
        return Read::Objects(Vec::new());
    }
    if !out.status.success() {
        return Read::Rejected(stderr);
    }
    let mut objects = Vec::new();
    let stream = serde_json::Deserializer::from_slice(&out.stdout).into_iter::<Json>();
    for value in stream {
        let value = value.expect("kubectl prints JSON");
        // Several objects come as one List.
        match (value.get("kind"), value.get("items")) {
            (Some(Json::String(k)), Some(Json::Array(items))) if k == "List" => {
                objects.extend(items.iter().cloned())
            }
            _ => objects.push(value),
        }
    }
    Read::Objects(objects)
}

/// A document of a file as kubectl's YAML reader cuts it: after each line that starts
/// with `---`; a `---` line followed by more than a comment makes kubectl refuse the
/// file there.
struct Part {
    /// 1-based line of its first line (of the `---` line, for a refused one).
    line: u32,
    text: String,
    bad_separator: bool,
}

fn parts(text: &str) -> Vec<Part> {
    let mut parts = vec![Part {
        line: 1,
        text: String::new(),
        bad_separator: false,
    }];
    for (i, line) in (1u32..).zip(text.split_inclusive('\n')) {
        if let Some(rest) = line.strip_prefix("---") {
            let rest = rest.trim();
            let bad = !(rest.is_empty() || rest.starts_with('#'));
            parts.push(Part {
                line: if bad { i } else { i + 1 },
                text: String::new(),
                bad_separator: bad,
            });
            if !bad {
                continue;
            }
        }
        if let Some(last) = parts.last_mut() {
            last.text.push_str(line);
        }
    }
    parts
}

/// Problems go-yaml's parser (not its scanner) reports. go-yaml v2 gives their line
/// 0-based, and scanner problems' line 1-based (`parser.fail` in yaml.go); both count
/// from the document's first line.
const PARSER_PROBLEMS: &[&str] = &[
    "did not find expected <document start>",
    "did not find expected node content",
    "did not find expected key",
    "did not find expected '-' indicator",
    "did not find expected ',' or ']'",
    "did not find expected ',' or '}'",
    "found undefined tag handle",
    "found duplicate %YAML directive",
    "found incompatible YAML document",
    "found duplicate %TAG directive",
];

/// The file line of a kubectl YAML error in a part, when kubectl names one.
fn kubectl_line(message: &str, part: &Part, last_line: u32) -> Option<u32> {
    let at = message.find("yaml: line ")? + "yaml: line ".len();
    let (number, problem) = message[at..].split_once(": ")?;
    let reported: u32 = number.parse().ok()?;
    let zero_based = PARSER_PROBLEMS.iter().any(|p| problem.starts_with(p));
    let line = part.line + reported - u32::from(!zero_based);
    // meshward reports an error past the last line (end of input) at the last line.
    Some(line.min(last_line))
}

/// Numbers compared by value: kubectl writes 1.0 as 1, and integers over i64 as floats.
fn canonical(v: &Json) -> Json {
    match v {
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Json::from(i),
            (None, Some(f))
                if f.fract() == 0.0
                    && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) =>
            {
                Json::from(f as i64)
            }
            (None, Some(f)) => serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number),
            (None, None) => v.clone(),
        },
        Json::Array(items) => Json::Array(items.iter().map(canonical).collect()),
        Json::Object(map) => {
            Json::Object(map.iter().map(|(k, v)| (k.clone(), canonical(v))).collect())
        }
        other => other.clone(),
    }
}

fn short(v: &Json) -> String {
    let text = v.to_string();
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// Compares one case; the disagreements, each naming the case and the document.
fn compare(kubectl: &Path, case: &Path) -> Vec<String> {
    let name = case
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let text = std::fs::read_to_string(case).expect("fixture is UTF-8");
    let last_line = (text.lines().count() as u32).max(1);
    let docs = parse_documents(&text, &Limits::default()).expect("within the limits");
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut problems = Vec::new();
    let mut kubectl_objects = Vec::new();
    let mut all_accepted = true;
    for part in parts(&text) {
        let mine: Option<&Document> = docs.iter().find(|d| d.start_line == part.line);
        let theirs = if part.bad_separator {
            Read::Rejected("invalid Yaml document separator".into())
        } else {
            let file = scratch.path().join(format!("part-{}.yaml", part.line));
            std::fs::write(&file, &part.text).expect("write part");
            kubectl_read(kubectl, &file)
        };
        let at = format!("{name}, document at line {}", part.line);
        match (&theirs, mine.map(|d| &d.result)) {
            (Read::Objects(objects), mine) => {
                kubectl_objects.extend(objects.iter().cloned());
                let mine = match mine {
                    None | Some(Ok(None)) => None,
                    Some(Ok(Some(node))) => Some(node.to_json()),
                    Some(Err(e)) => {
                        problems.push(format!(
                            "{at}: kubectl accepts it ({}) but meshward reports line {}: {}",
                            objects.first().map(short).unwrap_or_else(|| "empty".into()),
                            e.line,
                            e.message
                        ));
                        continue;
                    }
                };
                let want = objects.first().map(canonical);
                if mine.as_ref().map(canonical) != want {
                    problems.push(format!(
                        "{at}: kubectl reads {} but meshward {}",
                        want.as_ref().map(short).unwrap_or_else(|| "nothing".into()),
                        mine.as_ref().map(short).unwrap_or_else(|| "nothing".into())
                    ));
                }
            }
            (Read::Rejected(message), mine) => {
                all_accepted = false;
                match mine {
                    Some(Err(e)) => {
                        if let Some(line) = kubectl_line(message, &part, last_line) {
                            if e.line != line {
                                problems.push(format!(
                                    "{at}: kubectl rejects it at line {line} ({message}) but meshward at line {}: {}",
                                    e.line, e.message
                                ));
                            }
                        }
                    }
                    _ => problems.push(format!(
                        "{at}: kubectl rejects it ({message}) but meshward accepts it"
                    )),
                }
            }
        }
    }
    // The cut above must be kubectl's own: the whole file reads the same.
    match kubectl_read(kubectl, case) {
        Read::Objects(whole) if all_accepted => {
            let (whole, parts): (Vec<Json>, Vec<Json>) = (
                whole.iter().map(canonical).collect(),
                kubectl_objects.iter().map(canonical).collect(),
            );
            if whole != parts {
                problems.push(format!(
                    "{name}: kubectl reads the whole file differently from its parts: the test's cut is not kubectl's"
                ));
            }
        }
        Read::Rejected(_) if !all_accepted => {}
        whole => problems.push(format!(
            "{name}: kubectl on the whole file ({whole:?}) disagrees with kubectl on its parts"
        )),
    }
    problems
}

#[test]
fn meshward_reads_every_edge_case_as_kubectl_does() {
    let kubectl = kubectl();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("tests/fixtures/yaml")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let problems: Vec<String> = cases.iter().flat_map(|c| compare(&kubectl, c)).collect();
    assert!(
        problems.is_empty(),
        "meshward and kubectl disagree on {} document(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
