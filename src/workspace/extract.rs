//! A git commit extracted file by file: only what the renders of a run read, read
//! with one `git cat-file --batch` per batch of roots. A blob the clone lacks (a
//! partial clone, a pruned object) is left out instead of failing every root.

use super::{git, TEMP_PREFIX};
use anyhow::{anyhow, bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;

/// Everything extracted for one revision, together: renders read far less, and a
/// tree of large files must not fill the disk.
const MAX_EXTRACTED_BYTES: u64 = 1024 * 1024 * 1024;

/// One file of the commit: its path below the checked folder and its blob.
struct Entry {
    path: String,
    object: String,
    size: u64,
}

pub struct Partial {
    dir: tempfile::TempDir,
    toplevel: PathBuf,
    commit: String,
    prefix: String,
    /// The commit's files, listed once when a render first needs any.
    listing: Option<Vec<Entry>>,
    /// Paths extracted (or found missing) so far.
    done: BTreeSet<String>,
    /// Paths whose blob the clone lacks, with the object git could not read.
    missing: BTreeMap<String, String>,
    bytes: u64,
}

impl Partial {
    pub(super) fn new(toplevel: &Path, commit: &str, prefix: &str) -> Result<Partial> {
        let dir = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempdir()
            .context("creating a folder for the revision")?;
        Ok(Partial {
            dir,
            toplevel: toplevel.to_path_buf(),
            commit: commit.to_string(),
            prefix: prefix.to_string(),
            listing: None,
            done: BTreeSet::new(),
            missing: BTreeMap::new(),
            bytes: 0,
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Files a render wanted that the clone lacks: path and object id.
    pub fn missing(&self) -> &BTreeMap<String, String> {
        &self.missing
    }

    /// Extracts the files `wanted` picks that are not on disk yet.
    pub(super) fn ensure(&mut self, wanted: &dyn Fn(&str) -> bool) -> Result<()> {
        if self.listing.is_none() {
            self.listing = Some(list(&self.toplevel, &self.commit, &self.prefix)?);
        }
        let listing = self.listing.as_deref().unwrap_or_default();
        let todo: Vec<&Entry> = listing
            .iter()
            .filter(|e| !self.done.contains(&e.path) && wanted(&e.path))
            .collect();
        if todo.is_empty() {
            return Ok(());
        }
        let size: u64 = todo.iter().map(|e| e.size).sum();
        if self.bytes.saturating_add(size) > MAX_EXTRACTED_BYTES {
            bail!(
                "the files its renders read add up to more than {} MiB; refusing to extract them",
                MAX_EXTRACTED_BYTES / (1024 * 1024)
            );
        }
        for gone in write_blobs(&self.toplevel, &todo, self.dir.path())? {
            self.missing.insert(gone.path.clone(), gone.object.clone());
        }
        self.bytes += size;
        self.done.extend(todo.iter().map(|e| e.path.clone()));
        Ok(())
    }
}

/// The commit's regular files below `prefix` (no links, no submodules).
fn list(toplevel: &Path, commit: &str, prefix: &str) -> Result<Vec<Entry>> {
    let out = git(toplevel)
        .args(["ls-tree", "-r", "-z", "-l", "--full-tree", commit])
        .output()
        .context("could not run git ls-tree")?;
    if !out.status.success() {
        bail!(
            "git ls-tree {commit} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut entries = Vec::new();
    for entry in out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8_lossy(entry);
        // "<mode> <type> <object> <size>\t<path>"
        let Some((meta, path)) = entry.split_once('\t') else {
            continue;
        };
        let Some(rel) = path.strip_prefix(prefix) else {
            continue;
        };
        let fields: Vec<&str> = meta.split_whitespace().collect();
        let [mode, "blob", object, size] = fields.as_slice() else {
            continue;
        };
        if *mode == "120000" || !safe(rel) {
            continue;
        }
        entries.push(Entry {
            path: rel.to_string(),
            object: object.to_string(),
            size: size.parse().unwrap_or(0),
        });
    }
    Ok(entries)
}

/// A path that stays inside the folder it is written to.
fn safe(path: &str) -> bool {
    !path.is_empty()
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// Streams the blobs from `git cat-file --batch` into their files under `dir`;
/// returns the entries whose blob the clone lacks.
fn write_blobs<'a>(toplevel: &Path, entries: &[&'a Entry], dir: &Path) -> Result<Vec<&'a Entry>> {
    let mut child = git(toplevel)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("could not run git cat-file")?;
    let mut stdin = child.stdin.take().context("git cat-file stdin")?;
    let ids: Vec<String> = entries.iter().map(|e| e.object.clone()).collect();
    // Write from a thread: git's output pipe would fill and deadlock otherwise.
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        for id in ids {
            writeln!(stdin, "{id}")?;
        }
        Ok(())
    });
    let mut reader = BufReader::new(child.stdout.take().context("git cat-file stdout")?);
    let mut missing = Vec::new();
    for e in entries.iter().copied() {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        // "<object> missing": the clone lacks it; the roots that read it say so.
        if header.trim_end().ends_with(" missing") {
            missing.push(e);
            continue;
        }
        let size: u64 = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("unexpected git cat-file output for {}: {header:?}", e.path))?;
        let target = dir.join(&e.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating the folder of {}", e.path))?;
        }
        let mut file =
            std::fs::File::create(&target).with_context(|| format!("creating {}", e.path))?;
        let copied = std::io::copy(&mut (&mut reader).take(size), &mut file)?;
        if copied != size {
            bail!("git cat-file ended inside {}", e.path);
        }
        let mut newline = [0u8; 1];
        reader.read_exact(&mut newline)?;
    }
    writer
        .join()
        .map_err(|_| anyhow!("git cat-file writer panicked"))?
        .context("writing to git cat-file")?;
    child.wait()?;
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::workspace::run_git as run;

    #[test]
    fn only_wanted_files_are_extracted_and_a_missing_blob_costs_only_itself() {
        let repo = tempfile::tempdir().expect("tempdir");
        let r = repo.path();
        run(r, &["init", "-q"]);
        std::fs::create_dir_all(r.join("app/chart/templates")).expect("mkdir");
        std::fs::write(r.join("app/chart/Chart.yaml"), "name: c\n").expect("write");
        std::fs::write(r.join("app/chart/templates/_h.tpl"), "{{/* h */}}").expect("write");
        std::fs::write(r.join("app/big.bin"), vec![0u8; 4096]).expect("write");
        std::fs::write(r.join("gone.yaml"), "kind: X\n").expect("write");
        run(r, &["add", "-A"]);
        run(r, &["commit", "-qm", "c"]);
        // A blob the clone lacks, as after a partial clone.
        let gone = std::process::Command::new("git")
            .arg("-C")
            .arg(r)
            .args(["rev-parse", "HEAD:gone.yaml"])
            .output()
            .expect("git runs");
        let gone = String::from_utf8_lossy(&gone.stdout).trim().to_string();
        std::fs::remove_file(r.join(format!(".git/objects/{}/{}", &gone[..2], &gone[2..])))
            .expect("remove loose object");
        let mut p = Partial::new(r, "HEAD", "app/").expect("partial");
        p.ensure(&|path| path.starts_with("chart/"))
            .expect("extract");
        assert!(p.path().join("chart/templates/_h.tpl").is_file());
        assert!(!p.path().join("big.bin").exists());
        let mut whole = Partial::new(r, "HEAD", "").expect("partial");
        whole
            .ensure(&|path| path.ends_with(".yaml"))
            .expect("a missing blob is left out, not an error");
        assert!(whole.path().join("app/chart/Chart.yaml").is_file());
        assert!(!whole.path().join("gone.yaml").exists());
        assert_eq!(
            whole.missing().get("gone.yaml").map(String::as_str),
            Some(gone.as_str())
        );
    }
}
