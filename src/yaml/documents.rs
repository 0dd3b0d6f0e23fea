//! Cutting a file into documents as kubectl's reader does.

use super::DocError;

/// One document's text as kubectl's reader cuts it out of a file.
pub(super) struct Chunk<'a> {
    /// Lines of the file before the text.
    pub(super) line: u32,
    pub(super) text: &'a str,
    /// What follows `---` on the line that starts this chunk, when it is more than
    /// a comment: kubectl refuses the file there.
    pub(super) bad_separator: Option<&'a str>,
}

/// The documents of a file, cut the way kubectl's YAML reader (k8s.io/apimachinery
/// `YAMLReader`, also used by Argo CD and Flux) cuts them: at every line that starts
/// with `---`, whatever the YAML around it. `...` does not cut: go-yaml reads only
/// the first document of each part, so what follows a `...` is never applied.
pub(super) fn split_documents(text: &str) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0u32;
    let mut bad: Option<&str> = None;
    let mut pos = 0usize;
    for (line_no, line) in (0u32..).zip(text.split_inclusive('\n')) {
        if let Some(rest) = line.strip_prefix("---") {
            add_chunk(&mut chunks, text, start, pos, start_line, bad);
            let rest = rest.trim();
            if rest.is_empty() || rest.starts_with('#') {
                start = pos + line.len();
                start_line = line_no + 1;
                bad = None;
            } else {
                start = pos;
                start_line = line_no;
                bad = Some(rest);
            }
        }
        pos += line.len();
    }
    add_chunk(&mut chunks, text, start, text.len(), start_line, bad);
    chunks
}

fn add_chunk<'a>(
    chunks: &mut Vec<Chunk<'a>>,
    text: &'a str,
    start: usize,
    end: usize,
    line: u32,
    bad_separator: Option<&'a str>,
) {
    let chunk = &text[start..end];
    // Blank parts are nothing to kubectl; a part with only comments is parsed (and
    // is empty).
    if bad_separator.is_some() || !chunk.trim().is_empty() {
        chunks.push(Chunk {
            line,
            text: chunk,
            bad_separator,
        });
    }
}

pub(super) fn bad_separator(line: u32, rest: &str) -> DocError {
    let shown = match rest.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &rest[..i]),
        None => rest.to_string(),
    };
    DocError::invalid(
        line,
        format!(
            "`---` is followed by `{shown}` on its line; kubectl allows only a comment there and rejects the file from this line on. Move `{shown}` to the next line"
        ),
    )
}
