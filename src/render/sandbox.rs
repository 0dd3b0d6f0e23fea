//! The checkout as a render sees it: links that leave it refused, folders copied
//! without links.

use std::path::Path;

/// Copies a folder's files and subfolders; links are left out (one could point
/// outside the repository). Bounded by the revision, which is bounded on read.
pub(super) fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Names of the regular files in `dir` (none when it cannot be read).
pub(super) fn list_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Symlinks under `dir` that resolve outside `repo` (or nowhere).
pub(super) fn escaping_symlinks(repo: &Path, dir: &Path) -> Vec<String> {
    let Ok(repo) = repo.canonicalize() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_symlink() {
                let inside = path
                    .canonicalize()
                    .map(|t| t.starts_with(&repo))
                    .unwrap_or(false);
                if !inside {
                    out.push(
                        path.strip_prefix(&repo)
                            .unwrap_or(&path)
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            } else if ft.is_dir() && e.file_name() != ".git" {
                stack.push(path);
            }
        }
    }
    out
}

/// Where `path` (a file of the repository) leaves the repository through a symbolic
/// link, if it does: the link's target, for the message.
pub(super) fn escaping_link(repo: &Path, path: &str) -> Option<String> {
    let full = repo.join(path);
    let repo = repo.canonicalize().ok()?;
    // A link anywhere along the path counts, not only the file itself.
    let is_link = full
        .ancestors()
        .take_while(|a| a.starts_with(&repo) && *a != repo)
        .any(|a| {
            a.symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
        });
    if !is_link {
        return None;
    }
    match full.canonicalize() {
        Ok(target) if target.starts_with(&repo) => None,
        Ok(target) => Some(target.display().to_string()),
        Err(_) => Some("a target that does not exist".into()),
    }
}
