//! The user's shell snapshot: what their rc file defines, captured once by a
//! throwaway bash and replayed in every new shell.
//!
//! A throwaway `bash -i` (interactive, so an rc's "return unless interactive"
//! guard lets it through; no rc read of its own) sources the rc file with
//! stdin from `/dev/null`, its output discarded, under `umask 077`, with
//! `BASH_ENV` and `ENV` removed, in a process group of its own that is
//! SIGKILLed at the deadline and, whatever happened, once the capture is over
//! (an rc that starts an agent or a daemon leaves nothing behind). It then
//! dumps its functions, exported variables, options, aliases and `PATH`;
//! `compose` turns the dump into the snapshot file that shells source.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::child::ChildProcess;
use crate::group::GroupGuard;
use crate::group::ProcessGroupId;
use crate::group::ProcessRegistry;
use crate::parse_exported_env;
use crate::script::push_quoted;
use crate::shell_spawn::ChildSetup;
use crate::shell_spawn::install_child_setup;

/// Most aliases a snapshot keeps (as the reference tool).
const MAX_ALIASES: usize = 1000;

/// `set -o` options replayed when the rc turned them on. Everything else is
/// left alone: `errexit`, `nounset`, `xtrace`, `posix`, `histexpand` (a `!`
/// in a command would expand), `monitor`, `history`, the traces and the
/// editing modes change how every command runs, or are for a terminal.
const REPLAYED_SET_OPTIONS: &[&str] = &[
    "braceexpand",
    "hashall",
    "interactive-comments",
    "noclobber",
    "noglob",
    "physical",
    "pipefail",
];

/// `shopt` options never replayed: read-only ones (setting them fails).
const SKIPPED_SHOPT_OPTIONS: &[&str] = &["login_shell", "restricted_shell"];

/// The capture: sources the rc file (`$1`) and writes the dump to `$2`, one
/// NUL-terminated section each: functions (those not named with a leading
/// `_`), `export -p`, the `shopt` options that are on, `set +o`, `alias -p`
/// and `PATH`. The dump function is defined and made read-only before the rc
/// is read, so neither the rc's aliases nor its functions can change it.
const CAPTURE_SCRIPT: &str = r#"__shv_dump() {
  \builtin set +euf
  \builtin local IFS=$' \t\n' __shv_f
  for __shv_f in $(\builtin compgen -A function); do
    case $__shv_f in _*) ;; *) \builtin declare -f -- "$__shv_f" ;; esac
  done
  \builtin printf '\0'
  \builtin export -p; \builtin printf '\0'
  \builtin shopt -s; \builtin printf '\0'
  \builtin set +o; \builtin printf '\0'
  \builtin alias -p; \builtin printf '\0'
  \builtin printf '%s\0' "$PATH"
}
\builtin readonly -f __shv_dump
\builtin declare -r __shv_out="$2"
\builtin umask 077
\builtin source -- "$1" </dev/null >/dev/null 2>&1
\builtin set +o history 2>/dev/null
\builtin unset HISTFILE
\__shv_dump >"$__shv_out"
"#;

/// What to capture and where the snapshot goes.
#[derive(Debug)]
pub struct SnapshotSpec<'a> {
    /// The bash executable.
    pub program: &'a Path,
    /// The rc file to source.
    pub rc: &'a Path,
    /// The environment the throwaway bash starts with (`BASH_ENV` and `ENV`
    /// are removed from it); also the base that exported values and `PATH`
    /// entries are compared against.
    pub env: &'a [(OsString, OsString)],
    /// Where it runs.
    pub cwd: &'a Path,
    /// When it is killed.
    pub deadline: Duration,
    /// Variables the snapshot never sets (the runtime's guard keys and
    /// reserved names).
    pub skip_var: fn(&str) -> bool,
    /// The snapshot file to write (created 0600; its directory should be 0700).
    pub out: &'a Path,
}

/// What a snapshot holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotSummary {
    /// Functions defined.
    pub functions: usize,
    /// Aliases defined.
    pub aliases: usize,
    /// Exported variables set (those the functions reference).
    pub exports: usize,
    /// `PATH` entries added.
    pub path_entries: usize,
}

/// Why no snapshot was made.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The rc file is not there or not readable.
    #[error("the rc file {path} cannot be read: {source}")]
    Rc {
        /// The rc file.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// The throwaway bash could not be started or watched.
    #[error("the snapshot shell could not be started: {0}")]
    Spawn(io::Error),
    /// It did not finish in time (and was killed).
    #[error("sourcing {rc} did not finish within {ms} ms; it was killed")]
    Deadline {
        /// The rc file.
        rc: String,
        /// The deadline.
        ms: u128,
    },
    /// It exited without a complete dump (the rc called `exit`, or failed).
    #[error("sourcing {rc} ended the shell with status {status}")]
    Exited {
        /// The rc file.
        rc: String,
        /// Its exit status.
        status: i32,
    },
    /// The dump could not be read or written as a snapshot.
    #[error("the snapshot could not be written: {0}")]
    Write(io::Error),
}

impl SnapshotError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            SnapshotError::Rc { .. } => "snapshot_rc_unreadable",
            SnapshotError::Spawn(_) => "snapshot_spawn_failed",
            SnapshotError::Deadline { .. } => "snapshot_timed_out",
            SnapshotError::Exited { .. } => "snapshot_rc_failed",
            SnapshotError::Write(_) => "snapshot_write_failed",
        }
    }
}

/// Captures the snapshot of `spec.rc` into `spec.out`. Must be called inside
/// a tokio runtime; the throwaway bash is in `registry` while it lives.
///
/// # Errors
/// See [`SnapshotError`]; nothing is left at `spec.out` on error.
pub async fn capture_snapshot(
    spec: &SnapshotSpec<'_>,
    registry: &Arc<ProcessRegistry>,
) -> Result<SnapshotSummary, SnapshotError> {
    let rc_name = spec.rc.display().to_string();
    std::fs::File::open(spec.rc).map_err(|source| SnapshotError::Rc {
        path: rc_name.clone(),
        source,
    })?;
    let dump_path = spec.out.with_extension("dump");
    let result = run_capture(spec, registry, &dump_path, &rc_name).await;
    let dump = result.and_then(|()| std::fs::read(&dump_path).map_err(SnapshotError::Write));
    let _ = std::fs::remove_file(&dump_path);
    let dump = dump?;
    let Some(sections) = split_dump(&dump) else {
        return Err(SnapshotError::Exited {
            rc: rc_name,
            status: 0,
        });
    };
    let (text, summary) = compose(&sections, spec.env, spec.skip_var);
    write_private(spec.out, &text).map_err(SnapshotError::Write)?;
    Ok(summary)
}

async fn run_capture(
    spec: &SnapshotSpec<'_>,
    registry: &Arc<ProcessRegistry>,
    dump_path: &Path,
    rc_name: &str,
) -> Result<(), SnapshotError> {
    let mut command = Command::new(spec.program);
    command
        .args([
            "--noprofile",
            "--norc",
            "-i",
            "-c",
            CAPTURE_SCRIPT,
            "shellvisor-snapshot",
        ])
        .arg(spec.rc)
        .arg(dump_path)
        .env_clear()
        .envs(
            spec.env
                .iter()
                .filter(|(name, _)| name != "BASH_ENV" && name != "ENV")
                .map(|(name, value)| (name, value)),
        )
        .current_dir(spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    install_child_setup(&mut command, ChildSetup::Helper, [-1, -1]);
    let child = command.spawn().map_err(SnapshotError::Spawn)?;
    let pid = i32::try_from(child.id())
        .map_err(|_| SnapshotError::Spawn(io::Error::other("pid out of range")))?;
    // It leads its own session and group (setsid before exec); from here on
    // the guard kills that group when the capture is over, however it ends.
    let group = ProcessGroupId::new(pid)
        .map(|group| GroupGuard::new(group, Arc::clone(registry)))
        .ok_or_else(|| SnapshotError::Spawn(io::Error::other("invalid process group")))?;
    let mut watched = ChildProcess::new(pid).map_err(SnapshotError::Spawn)?;
    // The std handle is not waited on: the pidfd watches and reaps it.
    drop(child);
    let exit = tokio::time::timeout(spec.deadline, watched.exited()).await;
    drop(group);
    let exit = match exit {
        Err(_) => {
            let _ = watched.exited().await;
            let _ = watched.reap();
            return Err(SnapshotError::Deadline {
                rc: rc_name.to_owned(),
                ms: spec.deadline.as_millis(),
            });
        }
        Ok(exit) => exit.map_err(SnapshotError::Spawn)?,
    };
    let _ = watched.reap();
    match exit.shell_status() {
        0 => Ok(()),
        status => Err(SnapshotError::Exited {
            rc: rc_name.to_owned(),
            status,
        }),
    }
}

/// The dump's sections, or `None` when it is incomplete.
struct Sections<'a> {
    functions: &'a [u8],
    exports: &'a [u8],
    shopt_on: &'a [u8],
    set_options: &'a [u8],
    aliases: &'a [u8],
    path: &'a [u8],
}

fn split_dump(dump: &[u8]) -> Option<Sections<'_>> {
    let mut parts = dump.split(|&byte| byte == 0);
    let sections = Sections {
        functions: parts.next()?,
        exports: parts.next()?,
        shopt_on: parts.next()?,
        set_options: parts.next()?,
        aliases: parts.next()?,
        path: parts.next()?,
    };
    // The dump ends with the terminator of its last section.
    (parts.next() == Some(&[][..]) && parts.next().is_none()).then_some(sections)
}

/// The snapshot file's text, from a dump taken in a shell that started with
/// `base_env`. Options come first (an `extglob` pattern in a function must
/// parse), then functions, the exported variables they reference, aliases
/// (after the functions, which were expanded when the rc defined them) and
/// the `PATH` entries the rc added. Every line is idempotent and keeps what
/// a session changed: a variable is set only while it is unset or still has
/// its base value, a `PATH` entry is added only when missing.
fn compose(
    dump: &Sections<'_>,
    base_env: &[(OsString, OsString)],
    skip_var: fn(&str) -> bool,
) -> (Vec<u8>, SnapshotSummary) {
    let mut out = b"# shellvisor: the user's shell snapshot\n".to_vec();
    let mut summary = SnapshotSummary::default();

    let shopts: Vec<&[u8]> = dump
        .shopt_on
        .split(|&byte| byte == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ' || b == b'\t').next())
        .filter(|name| !name.is_empty() && is_word(name))
        .filter(|name| {
            !SKIPPED_SHOPT_OPTIONS
                .iter()
                .any(|skip| skip.as_bytes() == *name)
        })
        .collect();
    if !shopts.is_empty() {
        out.extend_from_slice(b"\\builtin shopt -s");
        for name in shopts {
            out.push(b' ');
            out.extend_from_slice(name);
        }
        out.extend_from_slice(b" 2>/dev/null\n");
    }
    for line in dump.set_options.split(|&byte| byte == b'\n') {
        if let Some(name) = line.strip_prefix(b"set -o ")
            && REPLAYED_SET_OPTIONS
                .iter()
                .any(|keep| keep.as_bytes() == name)
        {
            out.extend_from_slice(b"\\builtin set -o ");
            out.extend_from_slice(name);
            out.push(b'\n');
        }
    }

    out.extend_from_slice(dump.functions);
    if !dump.functions.ends_with(b"\n") && !dump.functions.is_empty() {
        out.push(b'\n');
    }
    summary.functions = count_functions(dump.functions);

    let referenced = referenced_names(dump.functions);
    let base = |name: &[u8]| {
        base_env
            .iter()
            .find(|(key, _)| key.as_bytes() == name)
            .map(|(_, value)| value.as_bytes())
    };
    if let Ok(exported) = parse_exported_env(dump.exports) {
        for (name, value) in exported {
            let name_text = name.to_string_lossy();
            if !referenced.contains(name.as_bytes()) || skip_var(&name_text) || name == "PATH" {
                continue;
            }
            let base_value = base(name.as_bytes());
            if base_value == Some(value.as_bytes()) {
                continue;
            }
            out.extend_from_slice(b"if [[ ! -v ");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b" ]]");
            if let Some(base_value) = base_value {
                out.extend_from_slice(b" || [[ $");
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b" == ");
                push_quoted(&mut out, base_value);
                out.extend_from_slice(b" ]]");
            }
            out.extend_from_slice(b"; then \\builtin export ");
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            push_quoted(&mut out, value.as_bytes());
            out.extend_from_slice(b"; fi\n");
            summary.exports += 1;
        }
    }

    let aliases: Vec<&[u8]> = dump
        .aliases
        .split(|&byte| byte == b'\n')
        .filter(|line| line.starts_with(b"alias "))
        .take(MAX_ALIASES)
        .collect();
    if !aliases.is_empty() {
        out.extend_from_slice(b"\\builtin shopt -s expand_aliases\n");
        for line in &aliases {
            out.push(b'\\');
            out.extend_from_slice(b"builtin ");
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    summary.aliases = aliases.len();

    let base_path: Vec<&[u8]> = base(b"PATH")
        .unwrap_or_default()
        .split(|&byte| byte == b':')
        .collect();
    let first_base = dump
        .path
        .split(|&byte| byte == b':')
        .position(|entry| base_path.contains(&entry));
    let mut added = BTreeSet::new();
    let mut prepends = Vec::new();
    for (index, entry) in dump.path.split(|&byte| byte == b':').enumerate() {
        if entry.is_empty() || base_path.contains(&entry) || !added.insert(entry) {
            continue;
        }
        if first_base.is_some_and(|first| index < first) {
            prepends.push(entry);
        } else {
            push_path_line(&mut out, entry, false);
        }
    }
    // Prepended in reverse, so they end up in the rc's order.
    for entry in prepends.iter().rev() {
        push_path_line(&mut out, entry, true);
    }
    summary.path_entries = added.len();
    (out, summary)
}

fn push_path_line(out: &mut Vec<u8>, entry: &[u8], prepend: bool) {
    out.extend_from_slice(b"case \":$PATH:\" in *:");
    push_quoted(out, entry);
    out.extend_from_slice(b":*) ;; *) \\builtin export PATH=");
    if prepend {
        push_quoted(out, entry);
        out.extend_from_slice(b"\"${PATH:+:$PATH}\"");
    } else {
        out.extend_from_slice(b"\"${PATH:+$PATH:}\"");
        push_quoted(out, entry);
    }
    out.extend_from_slice(b" ;; esac\n");
}

fn is_word(name: &[u8]) -> bool {
    name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Functions in `declare -f` output: each definition starts a line with
/// `name () ` (bash prints `name () ` then the body on the next lines).
fn count_functions(text: &[u8]) -> usize {
    text.split(|&byte| byte == b'\n')
        .filter(|line| line.ends_with(b" () ") || line.ends_with(b" ()"))
        .count()
}

/// Names expanded in `text`: `$NAME`, `${NAME...}`, `${#NAME}`, `${!NAME}`.
fn referenced_names(text: &[u8]) -> BTreeSet<&[u8]> {
    let mut names = BTreeSet::new();
    let mut index = 0;
    while let Some(offset) = text[index..].iter().position(|&b| b == b'$') {
        let mut start = index + offset + 1;
        if text.get(start) == Some(&b'{') {
            start += 1;
            if matches!(text.get(start), Some(b'#' | b'!')) {
                start += 1;
            }
        }
        let len = text[start..]
            .iter()
            .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_')
            .count();
        if len > 0 && !text[start].is_ascii_digit() {
            names.insert(&text[start..start + len]);
        }
        index = start + len;
        if index >= text.len() {
            break;
        }
    }
    names
}

/// Writes `bytes` to a new file at `path`, mode 0600 (replacing one there).
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)?;
    io::Write::write_all(&mut file, bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn no_skip(_: &str) -> bool {
        false
    }

    #[test]
    fn names_referenced_by_functions_are_found_in_every_expansion_form() {
        let names = referenced_names(b"f () { echo $FOO ${BAR:-x} ${#BAZ} ${!QUX} $1 $$ ${10}; }");
        let names: Vec<&str> = names
            .iter()
            .map(|n| std::str::from_utf8(n).unwrap())
            .collect();
        assert_eq!(names, ["BAR", "BAZ", "FOO", "QUX"]);
    }

    #[test]
    fn an_incomplete_dump_is_refused() {
        assert!(split_dump(b"f\0e\0s\0o\0a\0").is_none());
        assert!(split_dump(b"f\0e\0s\0o\0a\0/bin\0").is_some());
        assert!(split_dump(b"f\0e\0s\0o\0a\0/bin\0extra\0").is_none());
    }

    #[test]
    fn composed_lines_keep_what_a_session_changed() {
        let sections = Sections {
            functions: b"greet () \n{ \n    echo \"hi $FOO\"\n}\n",
            exports: b"declare -x FOO=\"rc\"\ndeclare -x OTHER=\"x\"\ndeclare -x PATH=\"/a:/usr/bin:/b\"\n",
            shopt_on: b"extglob        \ton\nlogin_shell\ton\n",
            set_options: b"set -o pipefail\nset -o errexit\nset +o noglob\n",
            aliases: b"alias ll='ls -l'\n",
            path: b"/a:/usr/bin:/b",
        };
        let base = vec![(OsString::from("PATH"), OsString::from("/usr/bin"))];
        let (text, summary) = compose(&sections, &base, no_skip);
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("shopt -s extglob 2>/dev/null\n"), "{text}");
        assert!(!text.contains("login_shell"), "{text}");
        assert!(
            text.contains("set -o pipefail\n") && !text.contains("errexit"),
            "{text}"
        );
        assert!(
            text.contains("if [[ ! -v FOO ]]; then \\builtin export FOO='rc'; fi"),
            "{text}"
        );
        assert!(!text.contains("OTHER"), "not referenced: {text}");
        assert_eq!(
            summary,
            SnapshotSummary {
                functions: 1,
                aliases: 1,
                exports: 1,
                path_entries: 2
            }
        );
        // Replayed by a real bash twice over a session's own state: the
        // session's FOO stays, PATH entries are added once, in the rc's order.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("snap.sh");
        std::fs::write(&file, &text).unwrap();
        let script = format!(
            ". {0}; echo \"$PATH|$FOO\"; FOO=mine; . {0}; echo \"$PATH|$FOO\"; ll() {{ :; }}; greet",
            file.display()
        );
        let output = Command::new("bash")
            .args(["--noprofile", "--norc", "-c", &script])
            .env_clear()
            .env("PATH", "/usr/bin")
            .output()
            .unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert_eq!(
            stdout,
            "/a:/usr/bin:/b|rc\n/a:/usr/bin:/b|mine\nhi mine\n",
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
