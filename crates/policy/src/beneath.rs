//! Resolving a caller's relative path beneath a root, so that nothing outside
//! the root is ever opened.
//!
//! The path is percent-decoded once and refused if it is absolute, holds a
//! `..` component, a NUL, a backslash, or a `%` left after decoding (a doubly
//! encoded `%252e`). Existing components are then opened with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to the root: the
//! kernel refuses any resolution that would leave it, symlinks included.
//! Missing parent directories are created (mode 0700) when asked, one at a
//! time with `mkdirat` inside directories opened that way.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::path::PathBuf;

use rustix::fs::Mode;
use rustix::fs::OFlags;
use rustix::fs::ResolveFlags;

/// Why a path was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BeneathError {
    /// The path is not acceptable as written (absolute, `..`, NUL, ...).
    Refused(&'static str),
    /// Resolving it would leave the root (a symlink pointing out).
    Escapes,
    /// An operating-system error.
    Io(String),
}

/// Resolves `relative` (as written in a URL: percent-encoded, `/`-separated)
/// beneath `root`, creating `root` and, when `create_parents`, the missing
/// parent directories of the final component. Returns the path of the final
/// component (which may not exist yet).
///
/// # Errors
/// See [`BeneathError`].
pub fn resolve_beneath(
    root: &Path,
    relative: &str,
    create_parents: bool,
) -> Result<PathBuf, BeneathError> {
    let decoded =
        percent_decode(relative).ok_or(BeneathError::Refused("invalid percent-encoding"))?;
    if decoded.contains('\0') {
        return Err(BeneathError::Refused("NUL in path"));
    }
    if decoded.contains('\\') {
        return Err(BeneathError::Refused("backslash in path"));
    }
    if decoded.contains('%') {
        return Err(BeneathError::Refused("encoded twice"));
    }
    if decoded.starts_with('/') {
        return Err(BeneathError::Refused("absolute path"));
    }
    let components: Vec<&str> = decoded
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if components.contains(&"..") {
        return Err(BeneathError::Refused("path traversal (..)"));
    }
    create_private_dir(root)?;
    let root_fd = open_root(root)?;
    let mut resolved = root.to_path_buf();
    for (index, component) in components.iter().enumerate() {
        let last = index + 1 == components.len();
        let prefix = components[..=index].join("/");
        match open_beneath(&root_fd, &prefix) {
            Ok(_) => {}
            Err(rustix::io::Errno::NOENT) => {
                if last || !create_parents {
                    resolved.extend(&components[index..]);
                    return Ok(resolved);
                }
                let parent = if index == 0 {
                    open_root(root)?
                } else {
                    open_beneath(&root_fd, &components[..index].join("/")).map_err(classify)?
                };
                match rustix::fs::mkdirat(&parent, *component, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(err) => return Err(BeneathError::Io(err.to_string())),
                }
                // Opening it again proves it is a directory beneath the root.
                open_beneath(&root_fd, &prefix).map_err(classify)?;
            }
            Err(err) => return Err(classify(err)),
        }
        resolved.push(component);
    }
    Ok(resolved)
}

fn classify(err: rustix::io::Errno) -> BeneathError {
    match err {
        rustix::io::Errno::XDEV | rustix::io::Errno::LOOP => BeneathError::Escapes,
        other => BeneathError::Io(other.to_string()),
    }
}

fn create_private_dir(root: &Path) -> Result<(), BeneathError> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
    {
        Ok(()) => Ok(()),
        Err(err) => Err(BeneathError::Io(err.to_string())),
    }
}

fn open_root(root: &Path) -> Result<OwnedFd, BeneathError> {
    let fd = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| BeneathError::Io(err.to_string()))?;
    record_open(&fd);
    Ok(fd)
}

/// The only way this module opens anything below the root: the kernel
/// refuses to resolve outside `root_fd`.
fn open_beneath(root_fd: &OwnedFd, relative: &str) -> Result<OwnedFd, rustix::io::Errno> {
    let fd = rustix::fs::openat2(
        root_fd,
        relative,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )?;
    record_open(&fd);
    Ok(fd)
}

/// Decodes `%XX` escapes once. `None` for a malformed escape or a result
/// that is not UTF-8.
pub(crate) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
thread_local! {
    /// Every path this thread opened through this module (test builds only).
    pub(crate) static OPENED: std::cell::RefCell<Vec<PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
fn record_open(fd: &OwnedFd) {
    use std::os::fd::AsRawFd;
    if let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
        OPENED.with(|opened| opened.borrow_mut().push(path));
    }
}

#[cfg(not(test))]
fn record_open(_fd: &OwnedFd) {}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// At least 40 ways to try to leave the root.
    pub(crate) const ESCAPES: &[&str] = &[
        "..",
        "../",
        "../etc/passwd",
        "a/../../etc/passwd",
        "a/b/../../../x",
        "./../x",
        "/etc/passwd",
        "//etc/passwd",
        "%2e%2e",
        "%2e%2e/etc",
        "%2E%2E/etc/passwd",
        "..%2fetc",
        "%2e%2e%2fetc%2fpasswd",
        "%252e%252e/etc",
        "%252e%252e%252fetc",
        "%25%32%65",
        "..\\etc",
        "a\\..\\..\\etc",
        "%5c..%5cetc",
        "a%00b",
        "%00",
        "a\0b",
        "%2fetc%2fpasswd",
        "%2F",
        "link_out/passwd",
        "link_out",
        "link_abs",
        "link_abs/x",
        "link_dotdot/passwd",
        "link_loop/x",
        "nested/link_up/../x",
        "nested/link_up/passwd",
        "link_proc/self/root/etc/passwd",
        "link_proc",
        "%zz",
        "%",
        "%2",
        "a/%2e%2e/%2e%2e/x",
        "....//x/../..",
        "dir/../../../../..",
        "link_chain/passwd",
    ];

    pub(crate) fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        let outside = base.path().join("outside");
        std::fs::create_dir_all(root.join("nested")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("passwd"), "secret").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, root.join(name)).unwrap()
        };
        link(&outside, "link_out");
        link(Path::new("/etc"), "link_abs");
        link(Path::new("../outside"), "link_dotdot");
        link(Path::new("link_loop"), "link_loop");
        link(Path::new("/proc"), "link_proc");
        link(Path::new("link_out"), "link_chain");
        std::os::unix::fs::symlink(Path::new("../../outside"), root.join("nested/link_up"))
            .unwrap();
        (base, root, outside)
    }

    #[test]
    fn no_payload_of_the_corpus_resolves_or_opens_outside_the_root() {
        assert!(ESCAPES.len() >= 40, "{}", ESCAPES.len());
        let (_base, root, outside) = setup();
        let canonical_root = root.canonicalize().unwrap();
        for payload in ESCAPES {
            OPENED.with(|opened| opened.borrow_mut().clear());
            for create in [false, true] {
                match resolve_beneath(&root, payload, create) {
                    Err(_) => {}
                    Ok(path) => {
                        // Allowed only if it truly stays inside (e.g. a name
                        // that merely looks odd): its nearest existing ancestor
                        // must canonicalize inside the root.
                        let mut probe = path.clone();
                        while !probe.exists() {
                            probe.pop();
                        }
                        let real = probe.canonicalize().unwrap();
                        assert!(
                            real.starts_with(&canonical_root),
                            "{payload:?} resolved to {path:?} ({real:?})"
                        );
                    }
                }
            }
            OPENED.with(|opened| {
                for path in opened.borrow().iter() {
                    assert!(
                        path.starts_with(&canonical_root),
                        "{payload:?} opened {path:?}"
                    );
                }
            });
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("passwd")).unwrap(),
            "secret"
        );
        assert!(!outside.join("x").exists());
    }

    #[test]
    fn ordinary_paths_resolve_and_parents_are_created_private() {
        let (_base, root, _outside) = setup();
        assert_eq!(
            resolve_beneath(&root, "notes.md", false).unwrap(),
            root.join("notes.md")
        );
        assert_eq!(resolve_beneath(&root, "", false).unwrap(), root);
        let path = resolve_beneath(&root, "a/b%20c/file.txt", true).unwrap();
        assert_eq!(path, root.join("a/b c/file.txt"));
        let meta = std::fs::metadata(root.join("a/b c")).unwrap();
        assert!(meta.is_dir());
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o700
        );
        assert!(!root.join("x/y").exists());
        assert_eq!(
            resolve_beneath(&root, "x/y/z", false).unwrap(),
            root.join("x/y/z")
        );
        assert!(
            !root.join("x").exists(),
            "nothing created without create_parents"
        );
        assert_eq!(
            resolve_beneath(&root, "./nested/./f", false).unwrap(),
            root.join("nested/f")
        );
    }
}
