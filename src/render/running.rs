//! Rendering one planned root with the real tools, inside the sandbox and limits.

use super::planned::PlannedRoot;
use super::problem::{problem_finding, Problem};
use super::roots::{self, join, RootKind};
use super::sandbox::{copy_dir, escaping_link, escaping_symlinks, list_files};
use super::tools::{self, RenderLimits, Tools};
use super::{helm, kustomize};
use crate::finding::{Finding, Severity};
use crate::manifest::{self, Limits, Origin, Resource, SourceFile};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::Arc;

/// The result of rendering one root.
#[derive(Clone)]
pub struct Rendered {
    pub resources: Vec<Resource>,
    pub findings: Vec<Finding>,
}

/// Writes the kustomization Flux generates for a plain folder into `scratch/gen`:
/// copies of its YAML files (regular files only) at their paths below the folder,
/// and the folders below it that hold a kustomization, by relative path.
fn generate(
    scratch: &Path,
    repo_dir: &Path,
    folder: &str,
    resources: &[String],
    relative: &dyn Fn(&str) -> String,
) -> std::io::Result<()> {
    let gen = scratch.join("gen");
    std::fs::create_dir_all(&gen)?;
    let mut listed = Vec::new();
    for r in resources {
        let below = if folder.is_empty() {
            r.as_str()
        } else {
            r.strip_prefix(&format!("{folder}/")).unwrap_or(r)
        };
        let source = repo_dir.join(r);
        let meta = source.symlink_metadata()?;
        if meta.is_dir() {
            // `relative` is from the wrapper folder, a sibling of gen/.
            listed.push(relative(r));
        } else if meta.is_file() {
            let target = gen.join(below);
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::copy(&source, &target)?;
            listed.push(below.to_string());
        }
    }
    let k = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": listed,
    });
    std::fs::write(
        gen.join("kustomization.yaml"),
        serde_json::to_string_pretty(&k).unwrap_or_default(),
    )
}

/// A tool's message with paths as the repository names them, not as this
/// machine's folders: the revision's and scratch folders' absolute paths, the
/// wrapper kustomization's relative way up to the revision, and the staged copy of
/// a chart.
fn repository_paths(
    mut msg: String,
    repo_dir: &Path,
    scratch: &Path,
    wrap: Option<&(std::path::PathBuf, std::path::PathBuf)>,
    root_path: &str,
) -> String {
    if let Some(up) = wrap.and_then(|(wrap, repo)| kustomize::relative(wrap, repo)) {
        msg = msg.replace(&format!("{up}/"), "");
    }
    let chart = match root_path {
        "" => String::new(),
        path => format!("{path}/"),
    };
    for (dir, by) in [
        (scratch.join("chart"), chart),
        (
            scratch.join("wrap"),
            "(meshward's wrapper kustomization)/".to_string(),
        ),
        (repo_dir.to_path_buf(), String::new()),
        (scratch.to_path_buf(), String::new()),
    ] {
        for form in [std::fs::canonicalize(&dir).ok(), Some(dir)]
            .into_iter()
            .flatten()
        {
            msg = msg.replace(&format!("{}/", form.display()), &by);
        }
    }
    msg
}

/// Renders one root from the revision's folder on disk.
pub fn render_root(
    p: &PlannedRoot,
    repo_dir: &Path,
    tools: &Tools,
    limits: &RenderLimits,
    view_read: &dyn Fn(&str) -> Option<String>,
) -> Rendered {
    let root = &p.root;
    let mut findings: Vec<Finding> = p
        .problems
        .iter()
        .map(|pr| problem_finding(pr, root))
        .collect();
    let fail = |findings: &mut Vec<Finding>, problem: Problem| {
        findings.push(problem_finding(&problem, root));
        Rendered {
            resources: Vec::new(),
            findings: std::mem::take(findings),
        }
    };
    let blocked = !findings.is_empty();
    // Said whether or not the root renders: they are about the app object.
    findings.splice(0..0, p.notes.iter().map(|n| problem_finding(n, root)));
    if blocked {
        return Rendered {
            resources: Vec::new(),
            findings,
        };
    }
    for d in &p.dirs {
        let links = escaping_symlinks(repo_dir, &repo_dir.join(d));
        if !links.is_empty() {
            return fail(
                &mut findings,
                Problem::refused(&root.entry, &format!("symbolic links leave the repository ({}); meshward does not render through them", links.join(", "))),
            );
        }
    }
    let Ok(scratch) = tempfile::Builder::new()
        .prefix(crate::workspace::TEMP_PREFIX)
        .tempdir()
    else {
        return fail(
            &mut findings,
            Problem::failed(&root.entry, "could not create a scratch folder"),
        );
    };
    let (cmd, wrap_dir) = match root.kind {
        RootKind::Kustomize => {
            let Some(k) = &tools.kustomize else {
                return fail(
                    &mut findings,
                    Problem::tool_missing(&root.entry, "neither kustomize nor kubectl was found (MESHWARD_KUSTOMIZE, MESHWARD_KUBECTL, .tools/bin, PATH); nothing it deploys was checked. Run scripts/install-tools or install kustomize"),
                );
            };
            let wrap = scratch.path().join("wrap");
            let repo_abs = repo_dir
                .canonicalize()
                .unwrap_or_else(|_| repo_dir.to_path_buf());
            let wrap_abs = scratch
                .path()
                .canonicalize()
                .unwrap_or_else(|_| scratch.path().to_path_buf())
                .join("wrap");
            let relative =
                |p: &str| kustomize::relative(&wrap_abs, &repo_abs.join(p)).unwrap_or_default();
            let rel = match &root.generated {
                // The kustomization Flux generates for a plain folder, with copies of
                // its files (the load restrictor keeps kustomize inside a root).
                Some(resources) => match generate(scratch.path(), repo_dir, &root.path, resources, &relative) {
                    Ok(()) => "../gen".to_string(),
                    Err(e) => {
                        return fail(
                            &mut findings,
                            Problem::failed(&root.entry, &format!("could not write the kustomization Flux generates for the folder: {e}")),
                        )
                    }
                },
                None => relative(&root.path),
            };
            if std::fs::create_dir_all(&wrap)
                .and_then(|_| {
                    std::fs::write(
                        wrap.join("kustomization.yaml"),
                        kustomize::wrapper(&rel, &root.kustomize, &relative),
                    )
                })
                .is_err()
            {
                return fail(
                    &mut findings,
                    Problem::failed(&root.entry, "could not write the wrapper kustomization"),
                );
            }
            let mut cmd = match k {
                tools::Kustomize::Standalone(bin) => {
                    let mut c = std::process::Command::new(bin);
                    c.arg("build");
                    c
                }
                tools::Kustomize::Kubectl(bin) => {
                    let mut c = std::process::Command::new(bin);
                    c.arg("kustomize");
                    c
                }
            };
            cmd.arg("--load-restrictor")
                .arg("LoadRestrictionsRootOnly")
                .arg(&wrap_abs);
            (cmd, Some((wrap_abs, repo_abs)))
        }
        RootKind::Helm => {
            let Some(helm) = &tools.helm else {
                return fail(
                    &mut findings,
                    Problem::tool_missing(&root.entry, "helm was not found (MESHWARD_HELM, .tools/bin, PATH); nothing this chart deploys was checked. Run scripts/install-tools or install helm"),
                );
            };
            let problems = helm::check_dependencies(
                root,
                view_read,
                &|p| list_files(&repo_dir.join(p)),
                &|p| repo_dir.join(p).is_dir(),
            );
            if !problems.is_empty() {
                let mut f = findings;
                f.extend(problems.iter().map(|pr| problem_finding(pr, root)));
                return Rendered {
                    resources: Vec::new(),
                    findings: f,
                };
            }
            // Local dependencies go into a copy of the chart: the revision on disk may
            // be the user's own work tree.
            let local = helm::local_dependencies(root, view_read, &|p| repo_dir.join(p).is_dir());
            let chart_dir = if local.is_empty() {
                repo_dir.join(&root.path)
            } else {
                let copy = scratch.path().join("chart");
                let staged = copy_dir(&repo_dir.join(&root.path), &copy).and_then(|()| {
                    local.iter().try_for_each(|(name, folder)| {
                        copy_dir(&repo_dir.join(folder), &copy.join("charts").join(name))
                    })
                });
                if let Err(e) = staged {
                    return fail(
                        &mut findings,
                        Problem::failed(
                            &root.entry,
                            &format!("could not stage the chart's local dependencies: {e}"),
                        ),
                    );
                }
                copy
            };
            let mut cmd = std::process::Command::new(helm);
            cmd.arg("template")
                .arg(root.release.clone().unwrap_or_else(|| "release".into()))
                .arg(&chart_dir)
                .arg("--namespace")
                .arg(
                    root.helm
                        .release_namespace
                        .clone()
                        .or_else(|| root.namespace.clone())
                        .unwrap_or_else(|| "default".into()),
                );
            if let Some(v) = &root.helm.kube_version {
                cmd.arg("--kube-version").arg(v);
            }
            for v in &root.helm.api_versions {
                cmd.arg("--api-versions").arg(v);
            }
            if root.helm.skip_schema_validation {
                cmd.arg("--skip-schema-validation");
            }
            for v in &root.values {
                if let Some(link) = escaping_link(repo_dir, v) {
                    return fail(&mut findings, Problem::refused(&root.entry, &format!("values file {v} is a symbolic link that leaves the repository ({link}); meshward does not render through it")));
                }
                if !repo_dir.join(v).is_file() {
                    if root.helm.ignore_missing_values {
                        findings.push(problem_finding(
                            &Problem {
                                rule: super::apps::OPTIONAL_INPUT_MISSING,
                                severity: Severity::Info,
                                file: root.entry.clone(),
                                line: 0,
                                message: format!("values file {v} does not exist; the app object ignores missing values files, so the chart was rendered without it, as the controller does"),
                            },
                            root,
                        ));
                        continue;
                    }
                    return fail(
                        &mut findings,
                        Problem::failed(&root.entry, &format!("values file {v} does not exist, so the controller fails to render this chart too. Fix the path, or set ignoreMissingValueFiles (Argo CD) / ignoreMissingValuesFiles (Flux) if it is optional")),
                    );
                }
                cmd.arg("--values").arg(repo_dir.join(v));
            }
            if let Some(inline) = &root.inline_values {
                let file = scratch.path().join("inline-values.yaml");
                if std::fs::write(&file, serde_json::to_string(inline).unwrap_or_default()).is_err()
                {
                    return fail(
                        &mut findings,
                        Problem::failed(&root.entry, "could not write inline values"),
                    );
                }
                cmd.arg("--values").arg(file);
            }
            // Parameters come after every values file, as Argo CD passes them.
            for param in &root.helm.parameters {
                match param {
                    roots::HelmParameter::Set { name, value } => {
                        cmd.arg("--set").arg(format!("{name}={value}"));
                    }
                    roots::HelmParameter::SetString { name, value } => {
                        cmd.arg("--set-string").arg(format!("{name}={value}"));
                    }
                    roots::HelmParameter::SetFile { name, path } => {
                        if let Some(link) = escaping_link(repo_dir, path) {
                            return fail(&mut findings, Problem::refused(&root.entry, &format!("file parameter {name} reads {path}, a symbolic link that leaves the repository ({link}); meshward does not render through it")));
                        }
                        if !repo_dir.join(path).is_file() {
                            return fail(&mut findings, Problem::failed(&root.entry, &format!("file parameter {name} reads {path}, which does not exist, so Argo CD fails to render this chart too. Fix the path")));
                        }
                        cmd.arg("--set-file")
                            .arg(format!("{name}={}", repo_dir.join(path).display()));
                    }
                }
            }
            (cmd, None)
        }
    };
    let output = match tools::run(cmd, scratch.path(), limits) {
        Ok(o) => o,
        Err(tools::RunError::Timeout(t)) => {
            return fail(&mut findings, Problem::limit(&root.entry, format!("rendering took longer than {}s and was stopped; nothing it deploys was checked", t.as_secs())))
        }
        Err(tools::RunError::OutputTooLarge(max)) => {
            return fail(&mut findings, Problem::limit(&root.entry, format!("rendering produced more than {max} bytes and was stopped; nothing it deploys was checked")))
        }
        Err(tools::RunError::OutOfMemory(max)) => {
            return fail(&mut findings, Problem::limit(&root.entry, format!("rendering needed more than {} MiB of memory and was stopped; nothing it deploys was checked. A template that loops without bound (`range until` a huge number) does this; so does a chart far larger than any real one", max / (1024 * 1024))))
        }
        Err(tools::RunError::Spawn(e)) => return fail(&mut findings, Problem::failed(&root.entry, &format!("could not run the render tool: {e}"))),
        Err(tools::RunError::Failed(msg)) => {
            let msg = repository_paths(msg, repo_dir, scratch.path(), wrap_dir.as_ref(), &root.path);
            let msg: String = msg.chars().take(2000).collect();
            return fail(&mut findings, Problem::failed(&root.entry, &format!("the render tool failed, so nothing it deploys was checked: {msg}")));
        }
    };
    let text = String::from_utf8_lossy(&output).into_owned();
    let parse_limits = Limits {
        max_file_bytes: limits.max_output_bytes,
        ..Limits::default()
    };
    let namespace = root.namespace.clone().unwrap_or_else(|| "default".into());
    let mut loaded = manifest::load_with_namespace(
        &[SourceFile {
            path: root.entry.clone(),
            bytes: output,
        }],
        &parse_limits,
        Some(&namespace),
    );
    findings.append(&mut loaded.findings);
    let chart_name = view_read(&join(&root.path, "Chart.yaml").unwrap_or_default())
        .and_then(|t| yaml_serde::from_str::<Json>(&t).ok())
        .and_then(|c| c.get("name").and_then(Json::as_str).map(str::to_string))
        .unwrap_or_default();
    let entry = (root.entry.as_str(), root.entry_line);
    let helm_values = match root.kind {
        RootKind::Helm => helm::values_nodes(root, view_read, entry),
        RootKind::Kustomize => Vec::new(),
    };
    for r in &mut loaded.resources {
        let map = match (&root.kind, &wrap_dir) {
            (RootKind::Kustomize, Some((wrap, repo))) => {
                let (origin, patched_in) = kustomize::take_metadata(Arc::make_mut(&mut r.body));
                let gen = wrap.with_file_name("gen");
                let to_repo = |rel: &str| {
                    kustomize::wrapper_to_repo(wrap, repo, rel).or_else(|| {
                        // A copy in the generated kustomization: the folder's file.
                        let below = kustomize::wrapper_to_repo(wrap, &gen, rel)?;
                        join(&root.path, &below)
                    })
                };
                kustomize::source_map(
                    &r.kind,
                    &r.name,
                    origin,
                    &patched_in,
                    &to_repo,
                    view_read,
                    entry,
                    &root.kustomize.patches,
                )
            }
            _ => helm::source_map(
                root,
                &chart_name,
                helm::source_of_line(&text, r.line),
                view_read,
                entry,
                &helm_values,
            ),
        };
        let here = map.locate(&[]);
        r.file = here.file;
        r.line = here.line;
        r.origin = Some(Arc::new(map));
    }
    Rendered {
        resources: loaded.resources,
        findings,
    }
}
