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
    /// The paths that differ from another commit read beside this one
    /// ([`GitRepo::read_trees`]), with that commit's id.
    pub compared: Option<(String, std::sync::Arc<std::collections::BTreeSet<String>>)>,
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

/// The URLs of the remotes of the repository at `toplevel`: app objects that name
/// one of them deploy from this repository.
pub fn remote_urls(toplevel: &Path) -> Vec<String> {
    git_output(toplevel, &["config", "--get-regexp", r"^remote\..*\.url$"])
        .map(|out| {
            out.lines()
                .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A commit's tree as `git ls-tree` lists it.
struct Listed {
    /// Without file contents.
    tree: Tree,
    /// The wanted files: (path under the prefix, blob id), sorted by path.
    blobs: Vec<(String, String)>,
    /// The listing of the whole commit (`git ls-tree -r -z -l`).
    raw: Vec<u8>,
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

    /// The repository that holds `dir` and the full commit ids `revs` stand for, with
    /// one `git rev-parse` when every revision names one commit.
    pub fn open(dir: &Path, revs: &[&str]) -> Result<(GitRepo, Vec<String>)> {
        let mut args = vec!["rev-parse", "--show-toplevel", "--show-prefix"];
        let asked: Vec<String> = revs.iter().map(|r| format!("{r}^{{commit}}")).collect();
        args.extend(asked.iter().map(String::as_str));
        // After `--`, every argument before it must be a revision.
        args.push("--");
        let together = (!revs.iter().any(|r| r.starts_with('-')))
            .then(|| git_output(dir, &args).ok())
            .flatten();
        if let Some(out) = together {
            // toplevel, prefix (empty at the top), one id per revision, `--`.
            let lines: Vec<&str> = out.split('\n').collect();
            if let [toplevel, prefix, ids @ .., "--"] = lines.as_slice() {
                // A range (`a..b`) or an exclusion (`^a`) gives other lines: such a
                // revision is refused below, as `--verify` refuses it.
                let full_id = |id: &&str| {
                    matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit())
                };
                if ids.len() == revs.len() && ids.iter().all(full_id) {
                    let repo = GitRepo {
                        toplevel: PathBuf::from(toplevel),
                        prefix: prefix.to_string(),
                    };
                    return Ok((repo, ids.iter().map(|id| id.to_string()).collect()));
                }
            }
        }
        // One by one, for an error that names what is wrong.
        let repo = GitRepo::discover(dir)?;
        let ids = revs
            .iter()
            .map(|r| repo.resolve(r))
            .collect::<Result<_>>()?;
        Ok((repo, ids))
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

    /// The files of `commit` (a full id, as [`GitRepo::open`] gives) under the prefix,
    /// read with one `git cat-file --batch`.
    pub fn read_tree(&self, commit: &str, limits: &TreeLimits) -> Result<Tree> {
        let Listed {
            mut tree, blobs, ..
        } = self.list_tree(commit, limits)?;
        tree.files = self.contents(&[&blobs])?.pop().unwrap_or_default();
        Ok(tree)
    }

    /// The files of two commits (base and head of a change), each blob read once
    /// although most are in both: one `git cat-file --batch` for the two. Each tree
    /// also knows the paths that differ from the other's.
    pub fn read_trees(&self, a: &str, b: &str, limits: &TreeLimits) -> Result<(Tree, Tree)> {
        let (listed_a, listed_b) =
            rayon::join(|| self.list_tree(a, limits), || self.list_tree(b, limits));
        let (mut listed_a, mut listed_b) = (listed_a?, listed_b?);
        // The listings are compared while git reads the blobs.
        let (changed, files) = rayon::join(
            || {
                differing_paths(
                    &sorted_entries(&listed_a.raw, &self.prefix),
                    &sorted_entries(&listed_b.raw, &self.prefix),
                )
            },
            || self.contents(&[&listed_a.blobs, &listed_b.blobs]),
        );
        let changed = std::sync::Arc::new(changed);
        let (mut tree_a, mut tree_b) = (
            std::mem::take(&mut listed_a.tree),
            std::mem::take(&mut listed_b.tree),
        );
        tree_a.compared = Some((b.to_string(), changed.clone()));
        tree_b.compared = Some((a.to_string(), changed));
        let mut files = files?.into_iter();
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

    /// The tree of `commit` without file contents, and its listing.
    fn list_tree(&self, commit: &str, limits: &TreeLimits) -> Result<Listed> {
        let listing = git(&self.toplevel)
            .args(["ls-tree", "-r", "-z", "-l", "--full-tree", commit])
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
        for (rel, meta) in listed_entries(&listing.stdout, &self.prefix) {
            let rel = String::from_utf8_lossy(rel);
            let meta = String::from_utf8_lossy(meta);
            tree.add_dirs_of(&rel);
            if !wanted(&rel) {
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
                    "revision {commit} holds more than {} YAML and JSON files; refusing to check it",
                    limits.max_files
                );
            }
        }
        blobs.sort();
        tree.source = Some(TreeSource::Git {
            toplevel: self.toplevel.clone(),
            commit: commit.to_string(),
            prefix: self.prefix.clone(),
        });
        Ok(Listed {
            tree,
            blobs,
            raw: listing.stdout,
        })
    }

    /// The full commit id a tree read from git was read at.
    pub fn commit_of(tree: &Tree) -> Option<&str> {
        match &tree.source {
            Some(TreeSource::Git { commit, .. }) => Some(commit),
            _ => None,
        }
    }
}

/// The entries of `git ls-tree -r -z -l` output under `prefix`: (path below the
/// prefix, "<mode> <type> <object> <size>").
fn listed_entries<'a>(
    raw: &'a [u8],
    prefix: &'a str,
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
    raw.split(|b| *b == 0).filter_map(move |entry| {
        let tab = entry.iter().position(|b| *b == b'\t')?;
        let (meta, path) = (&entry[..tab], &entry[tab + 1..]);
        Some((path.strip_prefix(prefix.as_bytes())?, meta))
    })
}

/// [`listed_entries`] sorted by path. git lists in tree order, which is the byte
/// order of full paths; sorted anyway (cheap on sorted input) so that comparing two
/// listings does not rest on it.
fn sorted_entries<'a>(raw: &'a [u8], prefix: &'a str) -> Vec<(&'a [u8], &'a [u8])> {
    let mut out: Vec<_> = listed_entries(raw, prefix).collect();
    out.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out
}

/// The paths whose mode, type or object differ between two listings, or that only
/// one holds: what `git diff --name-only --no-renames` lists, whatever the
/// repository's diff settings (an ignored submodule, quoted names).
fn differing_paths(
    a: &[(&[u8], &[u8])],
    b: &[(&[u8], &[u8])],
) -> std::collections::BTreeSet<String> {
    use std::cmp::Ordering;
    // The size column is the object's: the same object, the same size.
    let (mut i, mut j) = (0, 0);
    let mut out = std::collections::BTreeSet::new();
    let mut add = |path: &[u8]| {
        out.insert(String::from_utf8_lossy(path).into_owned());
    };
    while i < a.len() || j < b.len() {
        let order = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.0.cmp(y.0),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match order {
            Ordering::Less => {
                add(a[i].0);
                i += 1;
            }
            Ordering::Greater => {
                add(b[j].0);
                j += 1;
            }
            Ordering::Equal => {
                if a[i].1 != b[j].1 {
                    add(a[i].0);
                }
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// The contents of the blobs `ids` (blob id, a path it is at), in order, from one
/// `git cat-file --batch`.
fn cat_blobs(toplevel: &Path, ids: &[(&str, &str)]) -> Result<Vec<Vec<u8>>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut child = git(toplevel)
        // --buffer: git writes its output as its buffer fills, not once per blob.
        .args(["cat-file", "--batch", "--buffer"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("could not run git cat-file")?;
    let stdin = child.stdin.take().context("git cat-file stdin")?;
    let request: Vec<String> = ids.iter().map(|(id, _)| id.to_string()).collect();
    // Write from a thread: git's output pipe would fill and deadlock otherwise.
    // Buffered: a write per id was a system call per blob (37,000 at 100k objects).
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let mut stdin = std::io::BufWriter::new(stdin);
        for id in request {
            writeln!(stdin, "{id}")?;
        }
        stdin.flush()
    });
    let mut reader =
        BufReader::with_capacity(1 << 16, child.stdout.take().context("git cat-file stdout")?);
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
        // Read together: the listings were compared then.
        (TreeSource::Git { commit: b, .. }, TreeSource::Git { .. })
            if head.compared.as_ref().is_some_and(|(other, _)| other == b) =>
        {
            head.compared.as_ref().map(|(_, paths)| (**paths).clone())
        }
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
                    "-z",
                    "--no-renames",
                    b,
                    h,
                    "--",
                    &format!(":/{prefix}"),
                ],
            )
            .ok()?;
            Some(
                out.split('\0')
                    .filter_map(|l| strip(prefix, l.to_string()))
                    .filter(|l| !l.is_empty())
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
                &["diff", "--name-only", "-z", "--no-renames", b, "--", &scope],
            )
            .ok()?;
            let untracked = git_output(
                toplevel,
                &[
                    "ls-files",
                    "-z",
                    "--others",
                    "--exclude-standard",
                    "--full-name",
                    "--",
                    &scope,
                ],
            )
            .ok()?;
            // NUL-separated: names with other than ASCII are not quoted then.
            Some(
                changed
                    .split('\0')
                    .chain(untracked.split('\0'))
                    .filter_map(|l| strip(prefix, l.to_string()))
                    .filter(|l| !l.is_empty())
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

    fn write_file(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

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
        let write = |path: &str, text: &str| write_file(r, path, text);
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
        let (opened, ids) = GitRepo::open(&r.join("mesh"), &["HEAD", "HEAD~1"]).expect("open");
        assert_eq!(
            (&opened.toplevel, &opened.prefix),
            (&repo.toplevel, &repo.prefix)
        );
        assert_eq!(
            ids,
            [
                repo.resolve("HEAD").expect("HEAD"),
                repo.resolve("HEAD~1").expect("HEAD~1")
            ]
        );
        let (head, base) = repo.read_trees(&ids[0], &ids[1], &limits).expect("read");
        let (head_alone, base_alone) = (
            repo.read_tree(&ids[0], &limits).expect("read"),
            repo.read_tree(&ids[1], &limits).expect("read"),
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
        for (revs, error) in [
            (
                &["HEAD", "no-such-branch"][..],
                "unknown revision \"no-such-branch\"",
            ),
            // A range names two commits: refused, as `rev-parse --verify` refuses it.
            (&["HEAD~1..HEAD"][..], "unknown revision \"HEAD~1..HEAD\""),
            (&["--all"][..], "is not a revision name"),
        ] {
            let refused = GitRepo::open(r, revs).err().map(|e| e.to_string());
            assert!(
                refused.as_deref().is_some_and(|e| e.contains(error)),
                "{revs:?}: {refused:?}"
            );
        }
        let outside = tempfile::tempdir().expect("temp dir");
        let refused = GitRepo::open(outside.path(), &["HEAD"])
            .err()
            .map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("is not inside a git repository")),
            "{refused:?}"
        );
    }

    /// Base and head read together know the paths that differ between them, as
    /// `git diff --name-only` lists them (unquoted), below the checked folder.
    #[test]
    fn paths_that_differ_are_those_git_diff_names() {
        let repo = tempfile::tempdir().expect("temp dir");
        let r = repo.path();
        let git = |args: &[&str]| run_git(r, args);
        let write = |path: &str, text: &str| write_file(r, path, text);
        git(&["init", "-q"]);
        for path in [
            "mesh/same.yaml",
            "mesh/edited.yaml",
            "mesh/gone.yaml",
            "mesh/run.sh",
            "mesh/becomes-dir",
            "mesh/ünïcode.yaml",
            "mesh/README.md",
            "outside.yaml",
        ] {
            write(path, path);
        }
        git(&["add", "-A"]);
        git(&["commit", "-qm", "base"]);
        write("mesh/edited.yaml", "edited");
        write("mesh/new.yaml", "new");
        write("mesh/ünïcode.yaml", "edited");
        write("mesh/README.md", "edited");
        write("outside.yaml", "edited");
        std::fs::remove_file(r.join("mesh/gone.yaml")).expect("rm");
        std::fs::remove_file(r.join("mesh/becomes-dir")).expect("rm");
        write("mesh/becomes-dir/inside.yaml", "inside");
        git(&["add", "-A"]);
        // A mode change alone is a change.
        git(&["update-index", "--chmod=+x", "mesh/run.sh"]);
        git(&["commit", "-qm", "head"]);

        let (repo, ids) = GitRepo::open(&r.join("mesh"), &["HEAD", "HEAD~1"]).expect("open");
        let (head, base) = repo
            .read_trees(&ids[0], &ids[1], &TreeLimits::default())
            .expect("read");
        let diff = Command::new("git")
            .arg("-C")
            .arg(r)
            .args([
                "-c",
                "core.quotePath=false",
                "diff",
                "--name-only",
                "--no-renames",
            ])
            .args([&ids[1], &ids[0], "--", ":/mesh"])
            .output()
            .expect("git diff");
        let expected: std::collections::BTreeSet<String> = String::from_utf8_lossy(&diff.stdout)
            .lines()
            .map(|l| l.strip_prefix("mesh/").expect("below mesh/").to_string())
            .collect();
        assert_eq!(
            expected,
            [
                "README.md",
                "becomes-dir",
                "becomes-dir/inside.yaml",
                "edited.yaml",
                "gone.yaml",
                "new.yaml",
                "run.sh",
                "ünïcode.yaml",
            ]
            .map(String::from)
            .into()
        );
        assert_eq!(changed_paths(&base, &head), Some(expected));
        // Read one by one, the trees ask git.
        let (head_alone, base_alone) = (
            repo.read_tree(&ids[0], &TreeLimits::default())
                .expect("read"),
            repo.read_tree(&ids[1], &TreeLimits::default())
                .expect("read"),
        );
        assert_eq!(
            changed_paths(&base_alone, &head_alone),
            changed_paths(&base, &head)
        );
    }
}
