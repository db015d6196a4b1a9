//! Working-directory resolution.

use std::path::Component;
use std::path::Path;
use std::path::PathBuf;

use shellvisor_protocol::Error;
use shellvisor_protocol::Result;

/// Resolves a requested working directory against the session's current one:
/// `~` and `~/x` use `home`, relative paths join the session directory, and
/// `.`/`..` components are folded lexically (as `cd` does with logical paths).
/// The result must exist and be a directory (this `stat`s it).
///
/// # Errors
/// `Working directory does not exist: <abs>` or
/// `Working directory is not a directory: <abs>`; an empty path is
/// [`Error::InvalidRequest`].
pub fn resolve_cwd(requested: &str, session_cwd: &Path, home: Option<&Path>) -> Result<PathBuf> {
    if requested.is_empty() {
        return Err(Error::InvalidRequest {
            message: "cwd must not be empty".to_owned(),
        });
    }
    let joined = if requested == "~" {
        home.map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
    } else if let (Some(rest), Some(home)) = (requested.strip_prefix("~/"), home) {
        home.join(rest)
    } else {
        session_cwd.join(requested)
    };
    let path = normalize(&joined);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => Ok(path),
        Ok(_) => Err(Error::CwdNotDirectory {
            path: path.display().to_string(),
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(Error::CwdNotFound {
            path: path.display().to_string(),
        }),
        Err(err) => Err(Error::io(
            format!("checking working directory {}", path.display()),
            &err,
        )),
    }
}

/// Folds `.` and `..` without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push("/");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_home_and_reports_missing_or_file() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(dir.path().join("file"), b"x").unwrap();

        assert_eq!(resolve_cwd("sub", dir.path(), None).unwrap(), sub);
        assert_eq!(resolve_cwd("sub/../sub/.", dir.path(), None).unwrap(), sub);
        assert_eq!(
            resolve_cwd("~/sub", Path::new("/"), Some(dir.path())).unwrap(),
            sub
        );
        assert_eq!(
            resolve_cwd("~", Path::new("/"), Some(dir.path())).unwrap(),
            dir.path()
        );
        assert_eq!(
            resolve_cwd(sub.to_str().unwrap(), Path::new("/"), None).unwrap(),
            sub
        );

        let missing = resolve_cwd("nope", dir.path(), None).unwrap_err();
        assert_eq!(
            missing.to_string(),
            format!(
                "Working directory does not exist: {}",
                dir.path().join("nope").display()
            )
        );
        let file = resolve_cwd("file", dir.path(), None).unwrap_err();
        assert_eq!(
            file.to_string(),
            format!(
                "Working directory is not a directory: {}",
                dir.path().join("file").display()
            )
        );
    }
}
