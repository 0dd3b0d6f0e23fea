//! Helm output read back to its values: the values file line a rendered field was
//! set on, when the template takes it straight from a value, else the template line.

use crate::yaml::Node;
use serde_json::Value as Json;
use std::sync::Arc;

/// `.Values.a.b` references on a template line, as key paths.
fn values_refs(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find(".Values.") {
        let tail = &rest[i + 8..];
        let path: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.' || *c == '-')
            .collect();
        let keys: Vec<String> = path
            .split('.')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if !keys.is_empty() {
            out.push(keys);
        }
        rest = &tail[path.len().min(tail.len())..];
    }
    out
}

fn node_at<'a>(node: &'a Node, keys: &[String]) -> Option<&'a Node> {
    keys.iter().try_fold(node, |n, k| n.get(k))
}

/// Where a rendered field of a Helm root comes from: the values file line when the
/// template takes it straight from a value, else the template line, else None.
pub fn locate(
    template: Option<&(String, Arc<String>)>,
    values: &[(String, Arc<Node>)],
    path: &[Json],
) -> Option<(String, u32)> {
    let (file, text) = template?;
    let keys: Vec<String> = path
        .iter()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    let last = keys.last()?;
    let lines: Vec<&str> = text.lines().collect();
    let key_line = lines.iter().position(|l| {
        let t = l.trim_start().trim_start_matches("- ").trim_start();
        t.starts_with(&format!("{last}:"))
    });
    let lookup = |refs: Vec<Vec<String>>, suffix: &[String]| -> Option<(String, u32)> {
        for r in refs {
            let mut wanted = r.clone();
            wanted.extend_from_slice(suffix);
            // The last values file that sets it wins, as in helm.
            for (vfile, root) in values.iter().rev() {
                if let Some(n) = node_at(root, &wanted) {
                    return Some((vfile.clone(), n.line));
                }
            }
        }
        None
    };
    if let Some(i) = key_line {
        if let Some(found) = lookup(values_refs(lines[i]), &[]) {
            return Some(found);
        }
    }
    // A block inlined with toYaml: `spec: {{ toYaml .Values.spec | nindent 2 }}`.
    for (k, _) in keys.iter().enumerate() {
        let suffix = &keys[k..];
        for l in &lines {
            if let Some(found) = lookup(values_refs(l), suffix) {
                return Some(found);
            }
        }
    }
    key_line.map(|i| (file.clone(), i as u32 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_references() {
        assert_eq!(
            values_refs("  resolution: {{ .Values.serviceEntry.resolution | default \"DNS\" }}"),
            vec![vec!["serviceEntry".to_string(), "resolution".to_string()]]
        );
    }
}
