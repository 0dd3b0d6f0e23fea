//! Unpacking a GitHub tarball (`owner-repo-sha/…` inside a gzipped tar) into a
//! directory, treating it as hostile: bounded in total size and entry count, no
//! absolute paths or `..`, links skipped (never created), only regular files and
//! folders written, with permissions of our own choosing.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, Copy)]
pub struct ExtractLimits {
    /// Total bytes of file content written.
    pub max_total_bytes: u64,
    /// Entries of any kind in the archive.
    pub max_entries: usize,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        ExtractLimits {
            max_total_bytes: 1024 * 1024 * 1024,
            max_entries: 200_000,
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExtractStats {
    pub files: usize,
    pub bytes: u64,
    /// Symbolic and hard links found and not created.
    pub links_skipped: Vec<String>,
}

/// Unpacks `tar_gz` into `dest` (which must exist), dropping the top-level folder.
pub fn extract(tar_gz: &[u8], dest: &Path, limits: &ExtractLimits) -> Result<ExtractStats> {
    let decoder = flate2::read::GzDecoder::new(tar_gz);
    let mut archive = tar::Archive::new(decoder);
    let mut stats = ExtractStats::default();
    let mut entries_seen = 0usize;
    for entry in archive.entries().context("reading the tarball")? {
        let mut entry = entry.context("reading the tarball")?;
        entries_seen += 1;
        if entries_seen > limits.max_entries {
            bail!("the tarball holds more than {} entries", limits.max_entries);
        }
        let kind = entry.header().entry_type();
        let raw = entry
            .path()
            .context("an entry with a bad path")?
            .into_owned();
        let Some(rel) = relative_path(&raw)? else {
            continue; // the top-level folder itself, or a global header
        };
        let shown = rel.to_string_lossy().into_owned();
        match kind {
            tar::EntryType::Directory => {
                std::fs::create_dir_all(dest.join(&rel))
                    .with_context(|| format!("creating {shown}"))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.header().size().unwrap_or(u64::MAX);
                if stats.bytes.saturating_add(size) > limits.max_total_bytes {
                    bail!(
                        "the tarball unpacks to more than {} bytes",
                        limits.max_total_bytes
                    );
                }
                let target = dest.join(&rel);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("creating the folder of {shown}"))?;
                }
                let mut file =
                    std::fs::File::create(&target).with_context(|| format!("creating {shown}"))?;
                let written = std::io::copy(&mut (&mut entry).take(size), &mut file)
                    .with_context(|| format!("unpacking {shown}"))?;
                stats.bytes += written;
                stats.files += 1;
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                stats.links_skipped.push(shown);
            }
            // pax headers, GNU extensions, devices, fifos: nothing to write.
            _ => {}
        }
    }
    Ok(stats)
}

/// The entry's path below the top-level folder; None for the folder itself and for
/// entries that are not under one (GitHub's `pax_global_header`). Absolute paths and
/// `..` are errors: no GitHub tarball has them.
fn relative_path(raw: &Path) -> Result<Option<PathBuf>> {
    let mut parts = Vec::new();
    for c in raw.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_os_string()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                bail!("the tarball holds an unsafe path: {}", raw.display())
            }
        }
    }
    if parts.len() < 2 {
        return Ok(None);
    }
    Ok(Some(parts[1..].iter().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tarball(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut b = tar::Builder::new(enc);
        for (path, kind, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                h.set_size(0);
                h.set_link_name("/etc/passwd").unwrap();
            }
            // Write the name bytes directly: tar::Builder refuses `..` itself.
            let name = h.as_old_mut().name.as_mut();
            name[..path.len()].copy_from_slice(path.as_bytes());
            h.set_cksum();
            let body: &[u8] = if *kind == tar::EntryType::Symlink {
                &[]
            } else {
                data
            };
            b.append(&h, body).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn strips_the_top_folder_and_skips_links() {
        let gz = tarball(&[
            ("o-r-abc/", tar::EntryType::Directory, b""),
            ("o-r-abc/apps/a.yaml", tar::EntryType::Regular, b"kind: X\n"),
            ("o-r-abc/link.yaml", tar::EntryType::Symlink, b""),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let stats = extract(&gz, dir.path(), &ExtractLimits::default()).unwrap();
        assert_eq!(stats.files, 1);
        assert_eq!(stats.links_skipped, vec!["link.yaml".to_string()]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("apps/a.yaml")).unwrap(),
            "kind: X\n"
        );
        assert!(!dir.path().join("link.yaml").exists());
    }

    #[test]
    fn rejects_parent_components() {
        let gz = tarball(&[("o-r-abc/../../evil.yaml", tar::EntryType::Regular, b"x")]);
        let dir = tempfile::tempdir().unwrap();
        let err = extract(&gz, dir.path(), &ExtractLimits::default()).unwrap_err();
        assert!(format!("{err:#}").contains("unsafe path"), "{err:#}");
    }

    #[test]
    fn bounds_size_and_entries() {
        let gz = tarball(&[
            ("o-r-abc/a.yaml", tar::EntryType::Regular, &[b'a'; 600]),
            ("o-r-abc/b.yaml", tar::EntryType::Regular, &[b'b'; 600]),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let small = ExtractLimits {
            max_total_bytes: 1000,
            max_entries: 10,
        };
        assert!(extract(&gz, dir.path(), &small).is_err());
        let few = ExtractLimits {
            max_total_bytes: 10_000,
            max_entries: 1,
        };
        assert!(extract(&gz, dir.path(), &few).is_err());
    }
}
