//! Limits on the child processes meshward starts (render tools, the policy worker):
//! what a hostile input makes them do must end in them, not in meshward.

use std::process::{Child, Command, ExitStatus};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Children run under an address-space limit (`RLIMIT_AS`, set in the child before
/// it execs): on Linux always.
pub fn memory_limit() -> bool {
    cfg!(target_os = "linux")
}

/// Limits the child's address space before it execs (inherited through any exec
/// that follows, such as unshare's).
#[cfg(target_os = "linux")]
pub(crate) fn limit_memory(cmd: &mut Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    let limit = libc::rlimit {
        rlim_cur: bytes as libc::rlim_t,
        rlim_max: bytes as libc::rlim_t,
    };
    // SAFETY: the closure runs in the forked child before exec and calls only
    // setrlimit, which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn limit_memory(_cmd: &mut Command, _bytes: u64) {}

/// Reads `from` to its end on a thread, keeping at most `keep` bytes of it: a
/// child that writes without end can neither fill our memory nor block on a full
/// pipe (it gets no SIGPIPE while we still wait for it).
pub(crate) fn drain(
    mut from: impl std::io::Read + Send + 'static,
    keep: usize,
) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut cut = false;
        let mut chunk = [0u8; 16 * 1024];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 {
                break;
            }
            let room = keep.saturating_sub(buf.len());
            cut |= n > room;
            buf.extend_from_slice(&chunk[..n.min(room)]);
        }
        (buf, cut)
    })
}

/// Waits for `child` up to `limit`. Past it the child is killed and reaped (no
/// zombie left behind) and the answer is None.
pub(crate) fn wait_within(
    child: &mut Child,
    limit: Duration,
) -> std::io::Result<Option<ExitStatus>> {
    match child.wait_timeout(limit) {
        Ok(Some(status)) => Ok(Some(status)),
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            Ok(None)
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}
