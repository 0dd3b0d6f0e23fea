//! Repository contents: commits as tarballs (through the download host, as
//! GitHub redirects), and merge bases for the compare endpoint.

use super::*;

/// A gzipped tarball laid out like GitHub's: a pax global header naming the commit,
/// then every file under `owner-repo-sha7/`.
pub fn tarball(full_name: &str, sha: &str, files: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(enc);
    let record = format!("comment={sha}\n");
    let mut len = record.len() + 3;
    if format!("{len} {record}").len() != len {
        len += 1;
    }
    let pax = format!("{len} {record}");
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::XGlobalHeader);
    h.set_path("pax_global_header").unwrap();
    h.set_size(pax.len() as u64);
    h.set_mode(0o666);
    h.set_cksum();
    b.append(&h, pax.as_bytes()).unwrap();
    let top = format!("{}-{}/", full_name.replace('/', "-"), &sha[..7]);
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_path(&top).unwrap();
    h.set_size(0);
    h.set_mode(0o775);
    h.set_cksum();
    b.append(&h, &[][..]).unwrap();
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(data.len() as u64);
        h.set_mode(0o664);
        b.append_data(&mut h, format!("{top}{path}"), &data[..])
            .unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

pub(super) fn ancestors(r: &Repo, sha: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = Some(sha.to_string());
    while let Some(s) = cur {
        let Some(c) = r.commits.get(&s) else { break };
        out.push(s.clone());
        cur = c.parent.clone();
    }
    out
}

pub(super) fn merge_base(r: &Repo, base: &str, head: &str) -> Option<String> {
    let base_line: BTreeSet<String> = ancestors(r, base).into_iter().collect();
    if base_line.is_empty() {
        return None;
    }
    ancestors(r, head)
        .into_iter()
        .find(|s| base_line.contains(s))
}
