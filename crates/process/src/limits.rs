//! Resource limits.

use rustix::process::Resource;
use rustix::process::Rlimit;

/// Raises the soft limit on open file descriptors to the hard limit and returns
/// the new soft limit. Each session uses a handful of descriptors (shell stdin,
/// status pipe, pidfd, one FIFO per running command), so a thousand sessions
/// need more than the usual soft limit of 1024.
///
/// # Errors
/// When the limit cannot be read or set.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let limit = rustix::process::getrlimit(Resource::Nofile);
    let Some(hard) = limit.maximum else {
        // Unlimited hard limit: pick a generous fixed soft limit.
        let soft = 1 << 20;
        rustix::process::setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(soft),
                maximum: None,
            },
        )?;
        return Ok(soft);
    };
    if limit.current.is_some_and(|current| current >= hard) {
        return Ok(hard);
    }
    rustix::process::setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        },
    )?;
    Ok(hard)
}
