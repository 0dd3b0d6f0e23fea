//! The render tools (helm, kustomize) and how they are run: no network, no plugins,
//! a time limit and an output limit.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RenderLimits {
    pub timeout: Duration,
    pub max_output_bytes: usize,
    /// Address space of one tool run (`RLIMIT_AS`): a template that allocates
    /// without bound dies at it instead of taking the machine's memory. Go tools need
    /// about 1 GiB of address space to start at all.
    pub max_memory_bytes: u64,
}

impl Default for RenderLimits {
    fn default() -> Self {
        RenderLimits {
            timeout: Duration::from_secs(60),
            max_output_bytes: 32 * 1024 * 1024,
            max_memory_bytes: 2 * 1024 * 1024 * 1024,
        }
    }
}

/// How kustomize is invoked: its own binary, or `kubectl kustomize`.
#[derive(Debug, Clone)]
pub enum Kustomize {
    Standalone(PathBuf),
    Kubectl(PathBuf),
}

#[derive(Debug, Clone, Default)]
pub struct Tools {
    pub helm: Option<PathBuf>,
    pub kustomize: Option<Kustomize>,
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.is_file()
        && p.metadata()
            .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

/// Folders where the project's own `scripts/install-tools` puts pinned tools: the
/// checkout meshward was built from, and `.tools/bin` beside any ancestor of the
/// running binary.
fn project_tool_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/bin")];
    if let Ok(exe) = std::env::current_exe() {
        for ancestor in exe.ancestors().skip(1) {
            dirs.push(ancestor.join(".tools/bin"));
        }
    }
    dirs
}

fn find(name: &str, env_var: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env_var).map(PathBuf::from) {
        return is_executable(&p).then_some(p);
    }
    let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    project_tool_dirs()
        .into_iter()
        .chain(path_dirs)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

impl Tools {
    /// Finds helm and kustomize: `MESHWARD_HELM` / `MESHWARD_KUSTOMIZE` (a kustomize
    /// binary) / `MESHWARD_KUBECTL`, then the project's `.tools/bin`, then `PATH`.
    pub fn discover() -> Tools {
        let kustomize = find("kustomize", "MESHWARD_KUSTOMIZE")
            .map(Kustomize::Standalone)
            .or_else(|| find("kubectl", "MESHWARD_KUBECTL").map(Kustomize::Kubectl));
        Tools {
            helm: find("helm", "MESHWARD_HELM"),
            kustomize,
        }
    }
}

pub enum RunError {
    /// The tool could not be started.
    Spawn(String),
    Timeout(Duration),
    OutputTooLarge(usize),
    /// It ran out of its address space (`max_memory_bytes`).
    OutOfMemory(u64),
    Failed(String),
}

const UNSHARE: &str = "/usr/bin/unshare";
const ISOLATE: [&str; 4] = ["--user", "--map-root-user", "--net", "--"];

/// Whether tools can run in a network namespace of their own (util-linux
/// `unshare`, user namespaces allowed): probed once. Where they cannot (a container
/// whose seccomp profile forbids it), the proxy settings that lead nowhere and the
/// refusal of remote references before anything runs are the guard; a warning says
/// so once.
pub fn network_isolation() -> bool {
    static PROBED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROBED.get_or_init(|| {
        let works = Command::new(UNSHARE)
            .args(ISOLATE)
            .arg("/bin/true")
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !works {
            tracing::warn!("render tools run without a network namespace of their own (unshare --user --net is not allowed here); remote references are still refused before they run and proxies lead nowhere");
        }
        works
    })
}

/// Runs a tool with a scrubbed environment: no proxy configuration except one that
/// leads nowhere, no kubeconfig, no plugin folders, caches in a private temp dir;
/// and, where the machine allows it, in a network namespace with no interface but
/// loopback, so nothing the tool tries reaches the network.
pub fn run(cmd: Command, scratch: &Path, limits: &RenderLimits) -> Result<Vec<u8>, RunError> {
    let mut cmd = if network_isolation() {
        // unshare execs the tool in place: the child is the tool, for the time limit.
        let mut wrapped = Command::new(UNSHARE);
        wrapped
            .args(ISOLATE)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(dir) = cmd.get_current_dir() {
            wrapped.current_dir(dir);
        }
        wrapped
    } else {
        cmd
    };
    crate::child::limit_memory(&mut cmd, limits.max_memory_bytes);
    let blackhole = "http://127.0.0.1:9";
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", scratch)
        .env("HTTP_PROXY", blackhole)
        .env("HTTPS_PROXY", blackhole)
        .env("http_proxy", blackhole)
        .env("https_proxy", blackhole)
        .env("NO_PROXY", "")
        .env("KUBECONFIG", scratch.join("no-kubeconfig"))
        .env("HELM_PLUGINS", scratch.join("no-plugins"))
        .env("HELM_CACHE_HOME", scratch.join("cache"))
        .env("HELM_CONFIG_HOME", scratch.join("config"))
        .env("HELM_DATA_HOME", scratch.join("data"))
        .env("KUSTOMIZE_PLUGIN_HOME", scratch.join("no-plugins"))
        .env("XDG_CONFIG_HOME", scratch.join("config"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| RunError::Spawn(e.to_string()))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| RunError::Spawn("no stdout".into()))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| RunError::Spawn("no stderr".into()))?;
    let max = limits.max_output_bytes;
    // Read with a cap on a thread, so a flood cannot fill memory.
    let out_reader = std::thread::spawn(move || -> (Vec<u8>, bool) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match stdout.read(&mut chunk) {
                Ok(0) | Err(_) => return (buf, false),
                Ok(n) => {
                    if buf.len() + n > max {
                        return (buf, true);
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
    });
    // stderr is drained to the end but only its start kept: closing it early would
    // kill a tool that warns a lot (SIGPIPE) while its output is still good.
    let err_reader = crate::child::drain(stderr, 64 * 1024);
    let status = match crate::child::wait_within(&mut child, limits.timeout) {
        Ok(Some(status)) => status,
        Ok(None) => return Err(RunError::Timeout(limits.timeout)),
        Err(e) => return Err(RunError::Spawn(e.to_string())),
    };
    let (out, overflow) = out_reader.join().unwrap_or_default();
    let (err, _) = err_reader.join().unwrap_or_default();
    if overflow {
        let _ = child.kill();
        return Err(RunError::OutputTooLarge(max));
    }
    if !status.success() {
        let msg = String::from_utf8_lossy(&err).trim().to_string();
        // Go's runtime says so when its allocation hits the address-space limit.
        if crate::child::memory_limit()
            && [
                "runtime: out of memory",
                "failed to reserve",
                "cannot allocate memory",
            ]
            .iter()
            .any(|m| msg.contains(m))
        {
            return Err(RunError::OutOfMemory(limits.max_memory_bytes));
        }
        return Err(RunError::Failed(if msg.is_empty() {
            format!("exited with {status}")
        } else {
            msg
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Result<Vec<u8>, RunError> {
        let scratch = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(script);
        run(cmd, scratch.path(), &RenderLimits::default())
    }

    #[test]
    fn where_the_machine_allows_it_tools_see_no_network_but_loopback() {
        if !network_isolation() {
            return; // Said by a warning; the proxy guard is tested by the render tests.
        }
        let out = sh("cat /proc/net/dev").unwrap_or_default();
        let text = String::from_utf8_lossy(&out);
        let interfaces: Vec<&str> = text
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next().map(str::trim))
            .collect();
        assert_eq!(interfaces, vec!["lo"], "{text}");
    }

    #[test]
    fn a_tool_that_warns_a_lot_still_renders() {
        // 1 MiB of warnings: more than a pipe holds and than is kept.
        let out = sh("head -c 1048576 /dev/zero | tr '\\0' w >&2; echo rendered");
        assert!(matches!(out, Ok(ref o) if o == b"rendered\n"));
    }

    #[test]
    fn a_failing_tools_message_is_kept_to_its_start() {
        match sh("echo 'Error: first line' >&2; head -c 1048576 /dev/zero | tr '\\0' x >&2; exit 3")
        {
            Err(RunError::Failed(msg)) => {
                assert!(msg.starts_with("Error: first line"), "{}", &msg[..40]);
                assert!(msg.len() <= 64 * 1024);
            }
            _ => panic!("expected a failure"),
        }
    }
}
