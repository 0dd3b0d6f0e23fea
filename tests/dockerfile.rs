//! deploy/Dockerfile can build, checked without Docker: the build stage's COPY lines
//! bring everything cargo reads (the manifest's targets, build.rs, every
//! include_str!/include_dir!/migrate! input). The test reads the COPY lines from the
//! Dockerfile, copies exactly those paths (minus what deploy/Dockerfile.dockerignore
//! keeps out of the context) into a folder laid out as the stage's filesystem, and
//! runs `cargo check --locked --offline --bin meshward` in the stage's WORKDIR.

use globset::{GlobBuilder, GlobMatcher};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const DOCKERFILE: &str = "deploy/Dockerfile";

/// One instruction, continuation lines joined.
#[derive(Debug)]
struct Instruction {
    keyword: String,
    args: String,
    line: usize,
}

#[derive(Debug)]
struct Stage {
    name: Option<String>,
    instructions: Vec<Instruction>,
}

/// Splits a Dockerfile into stages of instructions: comments and blank lines
/// dropped, lines ending in `\` joined with the next (comment lines inside a
/// continuation are skipped, as Docker does).
fn parse_dockerfile(text: &str) -> Vec<Stage> {
    let mut instructions = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_none()) {
            continue;
        }
        let (continues, body) = match trimmed.strip_suffix('\\') {
            Some(b) => (true, b.trim_end()),
            None => (false, trimmed),
        };
        let entry = current.get_or_insert_with(|| (i + 1, String::new()));
        if !entry.1.is_empty() {
            entry.1.push(' ');
        }
        entry.1.push_str(body);
        if !continues {
            instructions.push(current.take().expect("instruction"));
        }
    }
    instructions.extend(current);

    let mut stages: Vec<Stage> = Vec::new();
    for (line, text) in instructions {
        let (keyword, args) = text.split_once(char::is_whitespace).unwrap_or((&text, ""));
        let keyword = keyword.to_ascii_uppercase();
        let args = args.trim().to_string();
        if keyword == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let name = words
                .iter()
                .position(|w| w.eq_ignore_ascii_case("as"))
                .and_then(|i| words.get(i + 1))
                .map(|s| s.to_string());
            stages.push(Stage {
                name,
                instructions: Vec::new(),
            });
        }
        stages
            .last_mut()
            .unwrap_or_else(|| panic!("{DOCKERFILE}:{line}: {keyword} before FROM"))
            .instructions
            .push(Instruction {
                keyword,
                args,
                line,
            });
    }
    stages
}

/// A COPY (or ADD): its `--flags`, sources (relative to the build context) and
/// destination.
#[derive(Debug)]
struct Copy {
    flags: Vec<String>,
    sources: Vec<String>,
    dest: String,
    line: usize,
}

impl Copy {
    fn parse(i: &Instruction) -> Copy {
        let mut words: Vec<String> = Vec::new();
        let mut flags = Vec::new();
        let mut rest = i.args.as_str();
        while let Some(flag) = rest.strip_prefix("--") {
            let (f, r) = flag.split_once(char::is_whitespace).unwrap_or((flag, ""));
            flags.push(format!("--{f}"));
            rest = r.trim_start();
        }
        if rest.starts_with('[') {
            let list: Vec<String> = serde_json::from_str(rest).unwrap_or_else(|e| {
                panic!("{DOCKERFILE}:{}: {} JSON form: {e}", i.line, i.keyword)
            });
            words.extend(list);
        } else {
            words.extend(rest.split_whitespace().map(str::to_string));
        }
        let dest = words
            .pop()
            .unwrap_or_else(|| panic!("{DOCKERFILE}:{}: {} without arguments", i.line, i.keyword));
        assert!(
            !words.is_empty(),
            "{DOCKERFILE}:{}: {} without a source",
            i.line,
            i.keyword
        );
        Copy {
            flags,
            sources: words,
            dest,
            line: i.line,
        }
    }

    /// Copies from another stage or image (`--from=`), not from the build context.
    fn source_stage(&self) -> Option<&str> {
        self.flags.iter().find_map(|f| f.strip_prefix("--from="))
    }
}

/// The context's ignore rules: deploy/Dockerfile.dockerignore (BuildKit reads the one
/// named after the Dockerfile first), else a root .dockerignore. Patterns are Go
/// `filepath.Match` globs plus `**`, relative to the context root; a pattern also
/// excludes everything under a folder it matches; `!` re-includes; the last match wins.
struct DockerIgnore {
    rules: Vec<(bool, GlobMatcher)>,
}

impl DockerIgnore {
    fn load() -> DockerIgnore {
        let own = root().join(format!("{DOCKERFILE}.dockerignore"));
        let path = if own.exists() {
            own
        } else {
            root().join(".dockerignore")
        };
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let rules = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                let (include, pattern) = match l.strip_prefix('!') {
                    Some(p) => (true, p.trim()),
                    None => (false, l),
                };
                let pattern = pattern.trim_start_matches('/').trim_end_matches('/');
                let glob = GlobBuilder::new(pattern)
                    .literal_separator(true)
                    .build()
                    .unwrap_or_else(|e| panic!("{}: {pattern}: {e}", path.display()));
                (include, glob.compile_matcher())
            })
            .collect();
        DockerIgnore { rules }
    }

    /// Whether `rel` (a path relative to the context root) is left out of the context.
    fn excludes(&self, rel: &Path) -> bool {
        let mut excluded = false;
        for (include, glob) in &self.rules {
            if rel
                .ancestors()
                .any(|a| !a.as_os_str().is_empty() && glob.is_match(a))
            {
                excluded = !include;
            }
        }
        excluded
    }
}

/// Copies `src` (a file or folder of the context) to `dest`, as COPY does: a folder's
/// contents go into `dest`; ignored paths are skipped. Modification times are kept,
/// so cargo sees unchanged files as unchanged from one run to the next.
fn copy_from_context(ignore: &DockerIgnore, rel: &Path, dest: &Path) {
    let src = root().join(rel);
    if ignore.excludes(rel) {
        return;
    }
    let meta = std::fs::metadata(&src).expect("metadata");
    if meta.is_dir() {
        std::fs::create_dir_all(dest).expect("mkdir");
        let mut entries: Vec<_> = std::fs::read_dir(&src)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        entries.sort();
        for name in entries {
            copy_from_context(ignore, &rel.join(&name), &dest.join(&name));
        }
    } else {
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::copy(&src, dest).expect("copy");
        let file = std::fs::File::options()
            .write(true)
            .open(dest)
            .expect("open copy");
        file.set_modified(meta.modified().expect("mtime"))
            .expect("keep mtime");
    }
}

fn dockerfile() -> Vec<Stage> {
    let text = std::fs::read_to_string(root().join(DOCKERFILE)).expect("Dockerfile");
    parse_dockerfile(&text)
}

/// The stage that runs `cargo build`.
fn build_stage(stages: &[Stage]) -> &Stage {
    stages
        .iter()
        .find(|s| s.instructions.iter().any(is_cargo_build))
        .expect("a stage that runs `cargo build`")
}

fn is_cargo_build(i: &Instruction) -> bool {
    i.keyword == "RUN" && i.args.contains("cargo build")
}

/// The build stage's `RUN cargo build …`.
fn cargo_build(stage: &Stage) -> &Instruction {
    stage
        .instructions
        .iter()
        .find(|i| is_cargo_build(i))
        .expect("cargo build")
}

/// A stage's WORKDIR at the end (absolute; `/` without one).
fn workdir(stage: &Stage) -> PathBuf {
    let mut dir = PathBuf::from("/");
    for i in stage.instructions.iter().filter(|i| i.keyword == "WORKDIR") {
        dir = dir.join(i.args.trim());
    }
    dir
}

fn copies(stage: &Stage) -> Vec<Copy> {
    stage
        .instructions
        .iter()
        .filter(|i| i.keyword == "COPY" || i.keyword == "ADD")
        .map(Copy::parse)
        .collect()
}

/// Lays out what the build stage COPYs from the context under `rootfs` (the stage's
/// `/`) and returns the folder cargo runs in.
fn materialize_build_stage(rootfs: &Path) -> PathBuf {
    let stages = dockerfile();
    let stage = build_stage(&stages);
    let ignore = DockerIgnore::load();
    let mut cwd = PathBuf::from("/");
    for i in &stage.instructions {
        match i.keyword.as_str() {
            "WORKDIR" => cwd = cwd.join(i.args.trim()),
            "COPY" | "ADD" => {
                let c = Copy::parse(i);
                assert!(
                    c.source_stage().is_none(),
                    "{DOCKERFILE}:{}: the build stage copies from another stage; teach this test about it",
                    c.line
                );
                let dest = cwd.join(&c.dest);
                let into_dir = c.dest.ends_with('/') || c.sources.len() > 1;
                for s in &c.sources {
                    assert!(
                        !s.contains(['*', '?', '[']),
                        "{DOCKERFILE}:{}: wildcards in COPY sources are not handled by this test",
                        c.line
                    );
                    let rel = Path::new(s.trim_start_matches("./"));
                    let src = root().join(rel);
                    assert!(
                        src.exists(),
                        "{DOCKERFILE}:{}: COPY source {s} does not exist",
                        c.line
                    );
                    let target = if src.is_file() && into_dir {
                        dest.join(rel.file_name().expect("file name"))
                    } else {
                        dest.clone()
                    };
                    let target = rootfs.join(target.strip_prefix("/").expect("absolute"));
                    copy_from_context(&ignore, rel, &target);
                }
            }
            _ => {}
        }
    }
    rootfs.join(workdir(stage).strip_prefix("/").expect("absolute"))
}

/// The build stage's COPY lines are enough for cargo: `cargo check` (which reads
/// everything `cargo build` reads: the manifest and all its targets, build.rs, and
/// every file embedded at compile time) passes on exactly those files.
///
/// Cost: `check`, not `build` (no codegen, no linking), in the dev profile, with the
/// workspace's own target folder. Dependencies are registry crates whose artifacts do
/// not depend on where the package lives, so the ones `cargo clippy` (CI's first step)
/// or an earlier run of this test left in target/debug are reused; only meshward
/// itself is checked, in target/debug like the rest. The copy goes to a fixed folder,
/// target/dockerfile-check/, rather than a fresh temp dir: the package's path is part
/// of its artifacts' hash, so a fixed path lets each run replace the previous run's
/// artifacts instead of piling up new ones, and with modification times kept an
/// unchanged tree is checked again in about a second. The folder is wiped first, so
/// files the Dockerfile stopped copying are really gone.
#[test]
fn build_stage_copies_everything_cargo_reads() {
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let rootfs = target_dir.join("dockerfile-check");
    if rootfs.exists() {
        std::fs::remove_dir_all(&rootfs).expect("clear the previous copy");
    }
    let cwd = materialize_build_stage(&rootfs);
    assert!(
        cwd.join("Cargo.toml").is_file(),
        "the build stage's WORKDIR has no Cargo.toml"
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["check", "--locked", "--offline", "--bin", "meshward"])
        .arg("--quiet")
        .current_dir(&cwd)
        .env("CARGO_TARGET_DIR", &target_dir)
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "`cargo check --locked --offline --bin meshward` fails on what {DOCKERFILE}'s build stage copies \
         (a file cargo reads is missing from its COPY lines?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every COPY source in every stage exists and is not kept out of the context by the
/// ignore file (a cheap guard for the stages the test above does not build).
#[test]
fn every_copy_source_is_in_the_build_context() {
    let ignore = DockerIgnore::load();
    for stage in dockerfile() {
        for c in copies(&stage).iter().filter(|c| c.source_stage().is_none()) {
            for s in &c.sources {
                let rel = Path::new(s.trim_start_matches("./"));
                assert!(
                    root().join(rel).exists(),
                    "{DOCKERFILE}:{}: COPY source {s} does not exist",
                    c.line
                );
                if rel.as_os_str().is_empty() || s == "." {
                    continue;
                }
                assert!(
                    !ignore.excludes(rel),
                    "{DOCKERFILE}:{}: COPY source {s} is excluded by the dockerignore file",
                    c.line
                );
            }
        }
    }
}

/// The tools stage installs helm and kubectl only (install-tools' `render` group),
/// and the runtime copies them from where install-tools puts them (`.tools/bin` beside
/// `scripts/`, under the stage's WORKDIR).
#[test]
fn tools_stage_installs_only_the_render_tools() {
    let stages = dockerfile();
    let runs: Vec<(&Stage, &Instruction)> = stages
        .iter()
        .flat_map(|s| s.instructions.iter().map(move |i| (s, i)))
        .filter(|(_, i)| i.keyword == "RUN" && i.args.contains("scripts/install-tools"))
        .collect();
    assert_eq!(runs.len(), 1, "one RUN of scripts/install-tools");
    let (tools, run) = runs[0];
    let args: Vec<&str> = run
        .args
        .split_whitespace()
        .skip_while(|w| !w.ends_with("scripts/install-tools"))
        .skip(1)
        .collect();
    assert_eq!(
        args,
        ["render"],
        "{DOCKERFILE}:{}: install only helm and kubectl",
        run.line
    );
    let name = tools.name.as_deref().expect("the tools stage is named");
    let bin = workdir(tools).join(".tools/bin");
    let from_tools: Vec<Copy> = stages
        .iter()
        .flat_map(copies)
        .filter(|c| c.source_stage() == Some(name))
        .collect();
    assert!(!from_tools.is_empty(), "nothing is copied from {name}");
    for c in from_tools {
        for s in &c.sources {
            assert!(
                Path::new(s).starts_with(&bin),
                "{DOCKERFILE}:{}: {s} is not where install-tools installs ({})",
                c.line,
                bin.display()
            );
        }
    }

    // The group names are checked before anything is downloaded.
    let out = Command::new("bash")
        .arg(root().join("scripts/install-tools"))
        .arg("no-such-group")
        .output()
        .expect("run install-tools");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown group 'no-such-group'"));
}

#[test]
fn build_is_locked() {
    let stages = dockerfile();
    let stage = build_stage(&stages);
    let build = cargo_build(stage);
    assert!(build.args.contains("--locked"), "{}", build.args);
}

/// The image gets the binary the build stage builds: cargo puts a profile's binary
/// under `target/<profile>/` (`release` for `--release` and `bench`, `debug` for none,
/// `dev` and `test`), so a profile named in one line and not the other fails `docker
/// build` at the COPY.
#[test]
fn image_copies_the_binary_of_the_profile_built() {
    let stages = dockerfile();
    let stage = build_stage(&stages);
    let build = cargo_build(stage);
    let words: Vec<&str> = build.args.split_whitespace().collect();
    let profile = words
        .iter()
        .position(|w| *w == "--profile")
        .and_then(|i| words.get(i + 1).copied())
        .or_else(|| words.iter().find_map(|w| w.strip_prefix("--profile=")))
        .unwrap_or(if words.contains(&"--release") {
            "release"
        } else {
            "dev"
        });
    let dir = match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        custom => custom,
    };
    let binary = workdir(stage).join("target").join(dir).join("meshward");
    let name = stage.name.as_deref().expect("the build stage is named");
    let copied: Vec<String> = stages
        .iter()
        .flat_map(copies)
        .filter(|c| c.source_stage() == Some(name))
        .flat_map(|c| c.sources)
        .collect();
    assert!(
        copied.iter().any(|s| Path::new(s) == binary),
        "{DOCKERFILE} builds profile `{profile}` ({}) but copies {copied:?} from stage {name}",
        binary.display()
    );
    if !["release", "dev", "test", "bench"].contains(&profile) {
        let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
        assert!(
            manifest.contains(&format!("[profile.{profile}]")),
            "{DOCKERFILE} builds profile `{profile}`, which Cargo.toml does not define"
        );
    }
}

#[test]
fn parser_joins_continuations_and_reads_copy_forms() {
    let stages = parse_dockerfile(
        "# c\nFROM a AS one\nWORKDIR /w\nCOPY --chown=1:1 x \\\n  # inside\n  y ./\nFROM b\nCOPY [\"p q\", \"/d\"]\nCOPY --from=one /w/x /x\n",
    );
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[0].name.as_deref(), Some("one"));
    assert_eq!(workdir(&stages[0]), PathBuf::from("/w"));
    let c = copies(&stages[0]);
    assert_eq!(c[0].flags, ["--chown=1:1"]);
    assert_eq!(c[0].sources, ["x", "y"]);
    assert_eq!(c[0].dest, "./");
    let c = copies(&stages[1]);
    assert_eq!(c[0].sources, ["p q"]);
    assert_eq!(c[0].dest, "/d");
    assert_eq!(c[1].source_stage(), Some("one"));
}
