//! Taking the user's shell snapshot when a runtime starts.

use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use shellvisor_policy::NON_INTERACTIVE_ENV;
use shellvisor_policy::is_reserved_env_name;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::snapshot::SnapshotSpec;
use shellvisor_process::snapshot::capture_snapshot;
use shellvisor_protocol::Config;
use shellvisor_protocol::SnapshotSource;
use shellvisor_run::Warnings;

/// How long the rc file may take (as the reference tool).
const SNAPSHOT_DEADLINE: Duration = Duration::from_secs(2);

/// Variables a snapshot never sets: the guard keys of the non-interactive
/// environment (pager off, prompts failing fast) win over the rc, and the
/// runtime's reserved names are its own.
fn skipped(name: &str) -> bool {
    is_reserved_env_name(name) || NON_INTERACTIVE_ENV.iter().any(|(key, _)| *key == name)
}

/// The snapshot configured in `config.shell.snapshot`, written into the
/// runtime's directory (removed at shutdown): its path, or `None` when off
/// or when it failed (with a warning).
pub(crate) async fn take(
    config: &Config,
    base_env: &[(OsString, OsString)],
    runtime_dir: &Path,
    initial_cwd: &Path,
    registry: &Arc<ProcessRegistry>,
    warnings: &Warnings,
) -> Option<PathBuf> {
    let home = base_env
        .iter()
        .find(|(key, _)| key == "HOME")
        .map(|(_, value)| PathBuf::from(value));
    let rc = match &config.shell.snapshot {
        SnapshotSource::Off => return None,
        SnapshotSource::Bashrc => match &home {
            Some(home) => home.join(".bashrc"),
            None => {
                warnings.push(
                    "shell snapshot skipped: HOME is not set, so there is no ~/.bashrc".to_owned(),
                );
                return None;
            }
        },
        SnapshotSource::File(path) => initial_cwd.join(path),
    };
    let out = runtime_dir.join("snapshot.sh");
    // Where sessions start (a HOME inherited from another user may not be
    // enterable).
    let cwd = initial_cwd.to_path_buf();
    let spec = SnapshotSpec {
        program: &config.shell.program,
        rc: &rc,
        env: base_env,
        cwd: &cwd,
        deadline: SNAPSHOT_DEADLINE,
        skip_var: skipped,
        out: &out,
    };
    match capture_snapshot(&spec, registry).await {
        Ok(summary) => {
            tracing::debug!(
                functions = summary.functions,
                aliases = summary.aliases,
                exports = summary.exports,
                path_entries = summary.path_entries,
                "shell snapshot taken"
            );
            Some(out)
        }
        Err(err) => {
            tracing::warn!(code = err.code(), "shell snapshot skipped");
            warnings.push(format!("shell snapshot skipped ({}): {err}", err.code()));
            None
        }
    }
}
