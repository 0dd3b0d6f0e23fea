//! Materializing a revision as a list of files: the working tree on disk, or a git
//! revision read straight from the object store (no checkout, nothing executed).

mod extract;

use crate::manifest::SourceFile;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Files of one revision that meshward reads: manifests, the config file, policies.
#[derive(Debug, Default, Clone)]
pub struct Tree {
    pub files: Vec<SourceFile>,
    /// Files too large to read, with their size: reported, never silently dropped.
    pub oversized: Vec<(String, u64)>,
    /// Symlinks found (never followed).
    pub symlinks: Vec<String>,
    /// Every folder of the revision, whatever files it holds (an app object may
    /// apply one without YAML: jsonnet, a plugin's inputs), up to [`MAX_DIRS`].
    pub dirs: std::collections::BTreeSet<String>,
    /// Where the whole revision can be read from, for rendering.
    pub source: Option<TreeSource>,
}

/// Where a revision lives.
#[derive(Debug, Clone)]
pub enum TreeSource {
    /// A folder on disk (a working tree, an extracted tarball).
    Dir(PathBuf),
    /// A commit of a git repository, and the checked folder's place in it.
    Git {
        toplevel: PathBuf,
        commit: String,
        prefix: String,
    },
}

/// Folders of a revision remembered, at most: past it an app object's folder that
/// holds no YAML reads as missing.
pub const MAX_DIRS: usize = 100_000;

impl Tree {
    /// Remembers the folders above `path` (a file of the revision).
    fn add_dirs_of(&mut self, path: &str) {
        let mut at = path;
        while let Some((parent, _)) = at.rsplit_once('/') {
            if self.dirs.len() >= MAX_DIRS || !self.dirs.insert(parent.to_string()) {
                break;
            }
            at = parent;
        }
    }

    pub fn get(&self, path: &str) -> Option<&SourceFile> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// Limits on what a revision may hold.
#[derive(Debug, Clone, Copy)]
pub struct TreeLimits {
    pub max_files: usize,
    pub max_file_bytes: u64,
    /// All files read, together: many files just under the per-file limit must not
    /// add up to more memory than the machine has.
    pub max_total_bytes: u64,
}

impl Default for TreeLimits {
    fn default() -> Self {
        TreeLimits {
            max_files: 100_000,
            max_file_bytes: 4 * 1024 * 1024,
            max_total_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// Adds a file's size to the running total, refusing the tree past the limit.
fn add_bytes(total: &mut u64, size: u64, limits: &TreeLimits) -> Result<()> {
    *total = total.saturating_add(size);
    if *total > limits.max_total_bytes {
        bail!(
            "the YAML and JSON files of the tree add up to more than {} MiB; refusing to check it",
            limits.max_total_bytes / (1024 * 1024)
        );
    }
    Ok(())
}

/// Which files a check reads: manifests, kustomizations, repository policies, and
/// JSON files (parameters an ApplicationSet git files generator may read).
pub fn wanted(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".yaml")
        || lower.ends_with(".yml")
        || lower.ends_with(".json")
        || path == "Kustomization"
        || path.ends_with("/Kustomization")
        || (path.starts_with(".meshward/policies/") && lower.ends_with(".rego"))
}

fn push_checked(tree: &mut Tree, limits: &TreeLimits) -> Result<()> {
    if tree.files.len() + tree.oversized.len() > limits.max_files {
        bail!(
            "the tree holds more than {} YAML and JSON files; refusing to check it",
            limits.max_files
        );
    }
    Ok(())
}

/// The working tree under `root`. Symlinks are not followed (a link may point
/// outside the checkout); `.git` is skipped.
pub fn read_dir(root: &Path, limits: &TreeLimits) -> Result<Tree> {
    let mut tree = Tree::default();
    let meta =
        std::fs::metadata(root).with_context(|| format!("cannot read {}", root.display()))?;
    if !meta.is_dir() {
        bail!("{} is not a directory", root.display());
    }
    let mut total = 0u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .collect::<std::result::Result<_, _>>()
            .with_context(|| format!("cannot list {}", dir.display()))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let rel = relative(root, &path);
            let ft = entry.file_type()?;
            if ft.is_symlink() {
                if wanted(&rel) {
                    tree.symlinks.push(rel);
                }
                continue;
            }
            if ft.is_dir() {
                if entry.file_name() != ".git" {
                    stack.push(path);
                }
                continue;
            }
            if ft.is_file() {
                tree.add_dirs_of(&rel);
            }
            if !ft.is_file() || !wanted(&rel) {
                continue;
            }
            let size = entry.metadata()?.len();
            if size > limits.max_file_bytes {
                tree.oversized.push((rel, size));
            } else {
                add_bytes(&mut total, size, limits)?;
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                tree.files.push(SourceFile { path: rel, bytes });
            }
            push_checked(&mut tree, limits)?;
        }
    }
    tree.files.sort_by(|a, b| a.path.cmp(&b.path));
    tree.source = Some(TreeSource::Dir(root.to_path_buf()));
    Ok(tree)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A git repository that holds `dir`, and `dir`'s place in it.
pub struct GitRepo {
    pub toplevel: PathBuf,
    /// `dir` relative to the toplevel, with a trailing `/`, or empty.
    pub prefix: String,
}

fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir);
    // Never run hooks, pagers, or config-defined helpers of a hostile repository.
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .stdin(Stdio::null());
    cmd
}

fn git_output(dir: &Path, args: &[&str]) -> Result<String> {
    let out = git(dir)
        .args(args)
        .output()
        .context("could not run git (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .trim_end_matches('\n')
        .to_string())
}

impl GitRepo {
    pub fn discover(dir: &Path) -> Result<GitRepo> {
        let out = git_output(dir, &["rev-parse", "--show-toplevel", "--show-prefix"])
            .with_context(|| format!("{} is not inside a git repository", dir.display()))?;
        // One line each; the prefix's is empty at the top of the repository.
        let mut lines = out.split('\n');
        let toplevel = lines.next().unwrap_or_default();
        let prefix = lines.next().unwrap_or_default();
        Ok(GitRepo {
            toplevel: PathBuf::from(toplevel),
            prefix: prefix.to_string(),
        })
    }

    /// The URLs of the repository's remotes: app objects that name one of them
    /// deploy from this repository.
    pub fn remote_urls(&self) -> Vec<String> {
        git_output(
            &self.toplevel,
            &["config", "--get-regexp", r"^remote\..*\.url$"],
        )
        .map(|out| {
            out.lines()
                .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
    }

    /// The full commit id a revision name stands for.
    pub fn resolve(&self, rev: &str) -> Result<String> {
        if rev.starts_with('-') {
            bail!("revision {rev:?} is not a revision name");
        }
        git_output(
            &self.toplevel,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ],
        )
        .map_err(|_| anyhow!("unknown revision {rev:?} in {}", self.toplevel.display()))
    }

    /// The files of `rev` under the prefix, read with one `git cat-file --batch`.
    pub fn read_tree(&self, rev: &str, limits: &TreeLimits) -> Result<Tree> {
        let (mut tree, blobs) = self.list_tree(rev, limits)?;
        tree.files = self.contents(&[&blobs])?.pop().unwrap_or_default();
        Ok(tree)
    }

    /// The files of two revisions (base and head of a change), each blob read once
    /// although most are in both: one `git cat-file --batch` for the two.
    pub fn read_trees(&self, a: &str, b: &str, limits: &TreeLimits) -> Result<(Tree, Tree)> {
        let (listed_a, listed_b) =
            rayon::join(|| self.list_tree(a, limits), || self.list_tree(b, limits));
        let ((mut tree_a, blobs_a), (mut tree_b, blobs_b)) = (listed_a?, listed_b?);
        let mut files = self.contents(&[&blobs_a, &blobs_b])?.into_iter();
        tree_a.files = files.next().unwrap_or_default();
        tree_b.files = files.next().unwrap_or_default();
        Ok((tree_a, tree_b))
    }

    /// The files of each listing of (path, blob id), each distinct blob read once
    /// with one `git cat-file --batch`.
    fn contents(&self, listings: &[&[(String, String)]]) -> Result<Vec<Vec<SourceFile>>> {
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut ids: Vec<(&str, &str)> = Vec::new();
        for (path, id) in listings.iter().copied().flatten() {
            index.entry(id.as_str()).or_insert_with(|| {
                ids.push((id, path));
                ids.len() - 1
            });
        }
        let bytes = cat_blobs(&self.toplevel, &ids)?;
        Ok(listings
            .iter()
            .map(|blobs| {
                blobs
                    .iter()
                    .map(|(path, id)| SourceFile {
                        path: path.clone(),
                        bytes: index
                            .get(id.as_str())
                            .map(|&i| bytes[i].clone())
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .collect())
    }

    /// The tree of `rev` without file contents, and its wanted files as (path under
    /// the prefix, blob id), sorted by path.
    fn list_tree(&self, rev: &str, limits: &TreeLimits) -> Result<(Tree, Vec<(String, String)>)> {
        let commit = self.resolve(rev)?;
        let listing = git(&self.toplevel)
            .args(["ls-tree", "-r", "-z", "-l", "--full-tree", &commit])
            .output()
            .context("could not run git ls-tree")?;
        if !listing.status.success() {
            bail!(
                "git ls-tree {commit} failed: {}",
                String::from_utf8_lossy(&listing.stderr).trim()
            );
        }
        let mut tree = Tree::default();
        let mut total = 0u64;
        let mut blobs: Vec<(String, String)> = Vec::new();
        for entry in listing.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
            let entry = String::from_utf8_lossy(entry);
            // "<mode> <type> <object> <size>\t<path>"
            let Some((meta, path)) = entry.split_once('\t') else {
                continue;
            };
            let Some(rel) = path.strip_prefix(self.prefix.as_str()) else {
                continue;
            };
            tree.add_dirs_of(rel);
            if !wanted(rel) {
                continue;
            }
            let fields: Vec<&str> = meta.split_whitespace().collect();
            let (mode, kind, object, size) = match fields.as_slice() {
                [m, k, o, s] => (*m, *k, *o, s.parse::<u64>().unwrap_or(0)),
                _ => continue,
            };
            if kind != "blob" {
                continue;
            }
            if mode == "120000" {
                tree.symlinks.push(rel.to_string());
                continue;
            }
            if size > limits.max_file_bytes {
                tree.oversized.push((rel.to_string(), size));
                continue;
            }
            add_bytes(&mut total, size, limits)?;
            blobs.push((rel.to_string(), object.to_string()));
            push_checked(&mut tree, limits)?;
            if blobs.len() > limits.max_files {
                bail!(
                    "revision {rev} holds more than {} YAML and JSON files; refusing to check it",
                    limits.max_files
                );
            }
        }
        blobs.sort();
        tree.source = Some(TreeSource::Git {
            toplevel: self.toplevel.clone(),
            commit,
            prefix: self.prefix.clone(),
        });
        Ok((tree, blobs))
    }

    /// The full commit id a tree read from git was read at.
    pub fn commit_of(tree: &Tree) -> Option<&str> {
        match &tree.source {
            Some(TreeSource::Git { commit, .. }) => Some(commit),
            _ => None,
        }
    }
}

/// The contents of the blobs `ids` (blob id, a path it is at), in order, from one
/// `git cat-file --batch`.
fn cat_blobs(toplevel: &Path, ids: &[(&str, &str)]) -> Result<Vec<Vec<u8>>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut child = git(toplevel)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("could not run git cat-file")?;
    let mut stdin = child.stdin.take().context("git cat-file stdin")?;
    let request: Vec<String> = ids.iter().map(|(id, _)| id.to_string()).collect();
    // Write from a thread: git's output pipe would fill and deadlock otherwise.
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        for id in request {
            writeln!(stdin, "{id}")?;
        }
        Ok(())
    });
    let mut reader = BufReader::new(child.stdout.take().context("git cat-file stdout")?);
    let mut out = Vec::with_capacity(ids.len());
    for (_, path) in ids {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let size: usize = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("unexpected git cat-file output for {path}: {header:?}"))?;
        let mut bytes = vec![0u8; size];
        reader.read_exact(&mut bytes)?;
        let mut newline = [0u8; 1];
        reader.read_exact(&mut newline)?;
        out.push(bytes);
    }
    writer
        .join()
        .map_err(|_| anyhow!("git cat-file writer panicked"))?
        .context("writing to git cat-file")?;
    child.wait()?;
    Ok(out)
}

/// Every temporary folder meshward makes starts with this, so what a killed process
/// left behind can be found and removed ([`remove_stale_temp`]).
pub const TEMP_PREFIX: &str = "meshward-";

/// Removes meshward's temporary folders older than `age` from the system's temp
/// folder: a process killed with `kill -9` leaves its unpacked trees there. Returns
/// how many were removed. Younger ones may belong to a live process and stay.
pub fn remove_stale_temp(age: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(TEMP_PREFIX))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|d| d > age)
        })
        .filter(|e| std::fs::remove_dir_all(e.path()).is_ok())
        .count()
}

/// A revision as a folder on disk.
pub enum Materialized {
    /// A folder that is there already (a working tree, an extracted tarball).
    Borrowed(PathBuf),
    /// A git commit, extracted file by file as renders need them.
    Partial(extract::Partial),
}

impl Materialized {
    pub fn path(&self) -> &Path {
        match self {
            Materialized::Borrowed(p) => p,
            Materialized::Partial(p) => p.path(),
        }
    }

    /// Makes sure the files `wanted` picks are on disk: a git commit's are
    /// extracted (those not extracted yet); a folder holds them already.
    pub fn ensure(&mut self, wanted: &dyn Fn(&str) -> bool) -> Result<()> {
        match self {
            Materialized::Borrowed(_) => Ok(()),
            Materialized::Partial(p) => p.ensure(wanted),
        }
    }

    /// Files a render wanted that a git commit's clone lacks: path and object id.
    pub fn missing(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        match self {
            Materialized::Borrowed(_) => None,
            Materialized::Partial(p) => Some(p.missing()),
        }
    }
}

/// The revision as a folder on disk: a `Dir` as it is; a git commit as an empty
/// temporary folder that [`Materialized::ensure`] fills with what renders read, so
/// binaries, sources and a blob missing from the clone cost nothing.
pub fn materialize(source: &TreeSource) -> Result<Materialized> {
    match source {
        TreeSource::Dir(p) => Ok(Materialized::Borrowed(p.clone())),
        TreeSource::Git {
            toplevel,
            commit,
            prefix,
        } => Ok(Materialized::Partial(extract::Partial::new(
            toplevel, commit, prefix,
        )?)),
    }
}

/// Paths (relative to the checked folder) that differ between two revisions, or None
/// when that cannot be told (then everything is treated as changed).
pub fn changed_paths(base: &Tree, head: &Tree) -> Option<std::collections::BTreeSet<String>> {
    let strip = |prefix: &str, out: String| -> Option<String> {
        out.strip_prefix(prefix).map(str::to_string)
    };
    match (base.source.as_ref()?, head.source.as_ref()?) {
        (
            TreeSource::Git {
                toplevel,
                commit: b,
                prefix,
            },
            TreeSource::Git { commit: h, .. },
        ) => {
            let out = git_output(
                toplevel,
                &[
                    "diff",
                    "--name-only",
                    "--no-renames",
                    b,
                    h,
                    "--",
                    &format!(":/{prefix}"),
                ],
            )
            .ok()?;
            Some(
                out.lines()
                    .filter_map(|l| strip(prefix, l.to_string()))
                    .collect(),
            )
        }
        (
            TreeSource::Git {
                toplevel,
                commit: b,
                prefix,
            },
            TreeSource::Dir(_),
        ) => {
            let scope = format!(":/{prefix}");
            let changed = git_output(
                toplevel,
                &["diff", "--name-only", "--no-renames", b, "--", &scope],
            )
            .ok()?;
            let untracked = git_output(
                toplevel,
                &[
                    "ls-files",
                    "--others",
                    "--exclude-standard",
                    "--full-name",
                    "--",
                    &scope,
                ],
            )
            .ok()?;
            Some(
                changed
                    .lines()
                    .chain(untracked.lines())
                    .filter_map(|l| strip(prefix, l.to_string()))
                    .collect(),
            )
        }
        (TreeSource::Dir(b), TreeSource::Dir(h)) => Some(diff_dirs(b, h)),
        _ => None,
    }
}

fn all_files(root: &Path) -> std::collections::BTreeMap<String, PathBuf> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && e.file_name() != ".git" {
                stack.push(e.path());
            } else if ft.is_file() || ft.is_symlink() {
                out.insert(relative(root, &e.path()), e.path());
            }
        }
    }
    out
}

/// Changed files between two folders, by content.
fn diff_dirs(base: &Path, head: &Path) -> std::collections::BTreeSet<String> {
    let b = all_files(base);
    let h = all_files(head);
    let mut out = std::collections::BTreeSet::new();
    for (path, hp) in &h {
        match b.get(path) {
            Some(bp) if std::fs::read(bp).ok() == std::fs::read(hp).ok() => {}
            _ => {
                out.insert(path.clone());
            }
        }
    }
    out.extend(b.keys().filter(|p| !h.contains_key(*p)).cloned());
    out
}

/// Runs git in `dir` for a test, as a committer of its own.
#[cfg(test)]
pub(crate) fn run_git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .status()
        .expect("git runs")
        .success();
    assert!(ok, "git {args:?}");
}

#[cfg(test)]
mod tests {
    /// What a killed process left is removed at the next start; a live one's is not.
    #[test]
    fn stale_temp_folders_are_removed_and_fresh_ones_kept() {
        let tmp = std::env::temp_dir();
        let stale = tmp.join(format!("{TEMP_PREFIX}stale-test-{}", std::process::id()));
        let fresh = tmp.join(format!("{TEMP_PREFIX}fresh-test-{}", std::process::id()));
        for d in [&stale, &fresh] {
            std::fs::create_dir_all(d.join("tree")).expect("mkdir");
        }
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        std::fs::File::open(&stale)
            .and_then(|f| f.set_modified(two_hours_ago))
            .expect("age the folder");
        assert!(remove_stale_temp(std::time::Duration::from_secs(3600)) >= 1);
        assert!(!stale.exists());
        assert!(fresh.exists());
        std::fs::remove_dir_all(&fresh).expect("clean up");
    }

    use super::*;

    #[test]
    fn files_under_the_per_file_limit_still_add_up_to_a_refusal() {
        let dir = tempfile::tempdir().expect("temp dir");
        for i in 0..4 {
            std::fs::write(dir.path().join(format!("f{i}.yaml")), vec![b'#'; 1000]).expect("write");
        }
        let limits = TreeLimits {
            max_files: 100,
            max_file_bytes: 1000,
            max_total_bytes: 3500,
        };
        let err = read_dir(dir.path(), &limits).expect_err("the tree is too large");
        assert!(err.to_string().contains("add up to more than"), "{err}");
        let roomy = TreeLimits {
            max_total_bytes: 4000,
            ..limits
        };
        assert_eq!(read_dir(dir.path(), &roomy).expect("fits").files.len(), 4);
    }

    #[test]
    fn two_revisions_read_together_hold_what_each_holds_read_alone() {
        let repo = tempfile::tempdir().expect("temp dir");
        let r = repo.path();
        let git = |args: &[&str]| run_git(r, args);
        let write = |path: &str, text: &str| {
            let path = r.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        git(&["init", "-q"]);
        write("mesh/same.yaml", "kind: A\n");
        write("mesh/edited.yaml", "kind: B\n");
        write("mesh/gone.yaml", "kind: C\n");
        write("mesh/twin.yaml", "kind: A\n");
        write("outside.yaml", "kind: D\n");
        git(&["add", "-A"]);
        git(&["commit", "-qm", "base"]);
        write("mesh/edited.yaml", "kind: B2\n");
        write("mesh/new.yaml", "kind: E\n");
        std::fs::remove_file(r.join("mesh/gone.yaml")).expect("rm");
        git(&["add", "-A"]);
        git(&["commit", "-qm", "head"]);

        // From the subfolder: its prefix, and only its files.
        let repo = GitRepo::discover(&r.join("mesh")).expect("a repository");
        assert_eq!(repo.prefix, "mesh/");
        let top = GitRepo::discover(r).expect("a repository");
        assert_eq!(top.prefix, "");
        assert_eq!(top.toplevel, repo.toplevel);

        let limits = TreeLimits::default();
        let files = |tree: &Tree| -> Vec<(String, String)> {
            tree.files
                .iter()
                .map(|f| {
                    (
                        f.path.clone(),
                        String::from_utf8_lossy(&f.bytes).to_string(),
                    )
                })
                .collect()
        };
        let (head, base) = repo.read_trees("HEAD", "HEAD~1", &limits).expect("read");
        let (head_alone, base_alone) = (
            repo.read_tree("HEAD", &limits).expect("read"),
            repo.read_tree("HEAD~1", &limits).expect("read"),
        );
        assert_eq!(files(&head), files(&head_alone));
        assert_eq!(files(&base), files(&base_alone));
        assert_eq!(
            files(&head),
            [
                ("edited.yaml", "kind: B2\n"),
                ("new.yaml", "kind: E\n"),
                ("same.yaml", "kind: A\n"),
                ("twin.yaml", "kind: A\n"),
            ]
            .map(|(p, t)| (p.to_string(), t.to_string()))
        );
        assert!(files(&base).contains(&("gone.yaml".into(), "kind: C\n".into())));
        assert_eq!(GitRepo::commit_of(&head), GitRepo::commit_of(&head_alone),);
        assert_ne!(GitRepo::commit_of(&head), GitRepo::commit_of(&base));
        let unknown = repo.read_trees("HEAD", "no-such-branch", &limits);
        assert!(unknown.is_err_and(|e| e
            .to_string()
            .contains("unknown revision \"no-such-branch\"")),);
    }
}
