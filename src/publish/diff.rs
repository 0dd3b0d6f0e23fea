//! Which lines of a pull request's diff can carry a review comment: GitHub accepts
//! comments on the right side of the diff only on the lines its hunks show (added
//! and context lines), so a finding elsewhere goes to the summary only.

use std::collections::BTreeSet;

/// The head-side line numbers a file's `patch` (from the pull request's files) shows.
/// Malformed hunks end the parse: what was read so far is kept.
pub fn right_lines(patch: &str) -> BTreeSet<u32> {
    let mut lines = BTreeSet::new();
    let mut next: Option<u32> = None;
    for line in patch.lines() {
        if line.starts_with("@@") {
            next = hunk_start(line);
            if next.is_none() {
                break;
            }
            continue;
        }
        let Some(n) = next.as_mut() else { continue };
        match line.as_bytes().first() {
            Some(b'+') | Some(b' ') => {
                lines.insert(*n);
                *n += 1;
            }
            // An empty line inside a hunk is a context line whose space was trimmed.
            None => {
                lines.insert(*n);
                *n += 1;
            }
            // `-` is the left side only; `\ No newline at end of file` is no line.
            _ => {}
        }
    }
    lines
}

/// `@@ -a,b +c,d @@ …` → c.
fn hunk_start(header: &str) -> Option<u32> {
    let plus = header.split(' ').find(|p| p.starts_with('+'))?;
    let start = plus.trim_start_matches('+').split(',').next()?;
    start.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_and_context_lines_of_each_hunk() {
        let patch = "@@ -1,3 +1,4 @@\n a\n-b\n+B\n+C\n c\n@@ -10,2 +11,2 @@ kind: X\n x\n-y\n+Y\n\\ No newline at end of file\n";
        let lines: Vec<u32> = right_lines(patch).into_iter().collect();
        assert_eq!(lines, vec![1, 2, 3, 4, 11, 12]);
    }

    #[test]
    fn a_new_file_and_garbage() {
        let lines: Vec<u32> = right_lines("@@ -0,0 +1,2 @@\n+a\n+b\n")
            .into_iter()
            .collect();
        assert_eq!(lines, vec![1, 2]);
        assert!(right_lines("not a patch\n+x\n").is_empty());
        assert!(right_lines("@@ nonsense @@\n+x\n").is_empty());
    }
}
