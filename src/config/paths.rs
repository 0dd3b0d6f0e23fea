//! Which files of the tree are read as manifests (`paths:`, and what is never read
//! unless named: dot-files, dot-folders, CI configs).

pub(super) fn any_glob_matches(globs: &[String], path: &str) -> bool {
    globs.iter().any(|g| {
        globset::GlobBuilder::new(g)
            .literal_separator(true)
            .build()
            .map(|g| g.compile_matcher().is_match(path))
            .unwrap_or(false)
    })
}

/// CI systems' config files that are not dot-files: never manifests, wherever they are.
const CI_FILES: &[&str] = &[
    "azure-pipelines.yml",
    "azure-pipelines.yaml",
    "bitbucket-pipelines.yml",
    "appveyor.yml",
    "appveyor.yaml",
    "cloudbuild.yaml",
    "cloudbuild.yml",
    "buildspec.yml",
    "buildspec.yaml",
    "codefresh.yml",
    "codefresh.yaml",
];

/// A path part that hides what is below it or is itself hidden: a dot-name (not the
/// `.` and `..` of a relative path), or a CI config's file name.
fn unread_part(part: &str) -> bool {
    (part.starts_with('.') && part != "." && part != "..") || CI_FILES.contains(&part)
}

/// Is this file read as a manifest unless `.meshward.yaml` says otherwise? Not:
/// dot-files and everything under a dot-folder (`.github/workflows/`, `.circleci/`,
/// `.gitlab-ci.yml`, `.pre-commit-config.yaml`, `.fluxschema.yml`, …) and the CI
/// configs of [`CI_FILES`]: they configure tools, and a document in them that looks
/// like an object is not one the cluster gets. They stay in the tree (rendering and
/// `.meshward.yaml` may need them); only reading them as manifests is off.
pub fn read_by_default(path: &str) -> bool {
    !path.split('/').any(unread_part)
}

/// Does a `paths.include` glob name files [`read_by_default`] leaves out, so that
/// they are read? It must spell the dot-name or CI file out (`.deploy/**`,
/// `ci/.k8s/*.yaml`): as in a shell, `*` and `**` never reach into them.
pub fn names_unread(glob: &str) -> bool {
    glob.split('/').any(unread_part)
}
