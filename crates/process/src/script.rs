//! The shell protocol: what the runtime writes into a shell.
//!
//! Each run writes the user's command, unchanged, to a per-shell file and a
//! generated wrapper to another; the shell then reads one short line,
//! `\builtin . '<dir>/w'` (bash reads a pipe one byte at a time, so the line
//! is kept short). The wrapper sources the command file at top level (so `cd`,
//! variables and functions persist) inside a brace group whose redirections give
//! it stdin from `/dev/null` (fd 63, opened once), stdout and stderr the run's
//! output FIFO, and close the status fd and fd 63. A syntax error, an unclosed
//! quote or an unterminated heredoc stays inside the command file's own parse.
//! Afterwards the wrapper resets the options that change how a script runs
//! (`errexit nounset xtrace verbose pipefail posix`; in posix mode a
//! syntax error inside `.` would end the shell), restores variables the call's
//! `env` overrode, and writes two records to fd 62:
//!
//! ```text
//! S <nonce> NUL <exit status> NUL <$PWD> NUL        (the run is over)
//! E <nonce> NUL <export -p> NUL <functions> NUL <aliases> NUL <traps> NUL <disabled builtins> NUL
//! ```
//!
//! The status record comes first so a caller never waits for the environment
//! dump (about 0.65 µs per exported variable); the environment record follows
//! before the shell reads its next line. Only the wrapper writes to fd 62 (it
//! is closed for the command), so output can never forge a record; the nonce
//! ties records to their run.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The builtins the wrapper and the run line call: a shell in which a
/// command disabled one (`enable -n .`) cannot run the next command.
pub const WRAPPER_BUILTINS: &[&str] = &[
    ".", "builtin", "cd", "compgen", "enable", "export", "printf", "set", "shopt", "trap", "unset",
];

/// The shell's file descriptor for the status channel.
pub const STATUS_FD: i32 = 62;

/// Appends `bytes` to `out` as one single-quoted shell word (`'` becomes
/// `'\''`). Any bytes but NUL round-trip exactly.
pub fn push_quoted(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'\'');
    for &byte in bytes {
        if byte == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(byte);
        }
    }
    out.push(b'\'');
}

/// `bytes` as one single-quoted shell word.
pub fn quote(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 2);
    push_quoted(&mut out, bytes);
    out
}

/// The line the shell reads for every run: `\builtin . "$__shv_w"` (`\`
/// defeats aliases, `builtin` a function named `.`). bash reads a pipe one byte
/// at a time, so the wrapper's path sits in a variable that [`init_script`]
/// makes read-only: a command can neither change nor unset it.
pub const RUN_LINE: &[u8] = b"\\builtin . \"$__shv_w\"\n";

/// The line that makes a fresh shell run its start-up script at `path`.
pub fn source_line(path: &Path) -> Vec<u8> {
    let mut line = b"\\builtin . ".to_vec();
    push_quoted(&mut line, path.as_os_str().as_bytes());
    line.push(b'\n');
    line
}

/// Appends the writer of the status record for `nonce` (reporting
/// `$__shv_rc`) and, when `env_record`, of the environment record: `export -p`,
/// the function names, whether aliases expand, the DEBUG/RETURN/ERR traps, and
/// the builtins a command disabled (`enable -n`).
fn push_records(out: &mut Vec<u8>, nonce: &str, env_record: bool) {
    out.extend_from_slice(b"\\builtin printf 'S%s\\0%s\\0%s\\0' ");
    push_quoted(out, nonce.as_bytes());
    out.extend_from_slice(b" \"$__shv_rc\" \"$PWD\" >&62\n");
    if env_record {
        out.extend_from_slice(b"{ \\builtin printf 'E%s\\0' ");
        push_quoted(out, nonce.as_bytes());
        out.extend_from_slice(
            b"; \\builtin export -p; \\builtin printf '\\0'; \\builtin compgen -A function; \
              \\builtin printf '\\0'; \\builtin shopt -q expand_aliases && \\builtin printf a; \
              \\builtin printf '\\0'; \\builtin trap -p DEBUG RETURN ERR; \\builtin printf '\\0'; \
              \\builtin enable -n; \\builtin printf '\\0'; } >&62\n",
        );
    }
    out.extend_from_slice(b"\\builtin unset -v __shv_rc\n");
}

/// The script a new shell runs first: it opens `/dev/null` on fd 63 (the
/// stdin of every command), sources the user's shell `snapshot` if there is
/// one (quietly: a broken line in it is not a broken shell), and reports
/// records for `nonce` (readiness, with the shell's cwd, and its environment
/// when `env_record`: a session init that runs next reports it instead).
///
/// `exec` is called bare: through `builtin`, bash treats the redirection as
/// belonging to that one command and undoes it. The shell is fresh here, so no
/// function or alias can shadow `exec` yet.
pub fn init_script(
    nonce: &str,
    wrapper: &Path,
    snapshot: Option<&Path>,
    env_record: bool,
) -> Vec<u8> {
    let mut out = b"exec 63</dev/null\n\\builtin declare -r __shv_w=".to_vec();
    push_quoted(&mut out, wrapper.as_os_str().as_bytes());
    out.push(b'\n');
    if let Some(snapshot) = snapshot {
        out.extend_from_slice(b"\\builtin . ");
        push_quoted(&mut out, snapshot.as_os_str().as_bytes());
        out.extend_from_slice(b" </dev/null >/dev/null 2>&1\n");
    }
    out.extend_from_slice(b"__shv_rc=0\n");
    push_records(&mut out, nonce, env_record);
    out
}

/// The script that runs a session's init in the shell itself, before its
/// first command: the init's text (in the `command` file) sourced with stdin
/// from `/dev/null` and its output into the `output` file, then the records
/// for `nonce` (its status, the shell's cwd and environment).
pub fn session_init_script(nonce: &str, command: &Path, output: &Path) -> Vec<u8> {
    let mut out = b"__shv_rc=0\n\\builtin . ".to_vec();
    push_quoted(&mut out, command.as_os_str().as_bytes());
    out.extend_from_slice(b" </dev/null >");
    push_quoted(&mut out, output.as_os_str().as_bytes());
    out.extend_from_slice(b" 2>&1\n__shv_rc=$?\n");
    push_records(&mut out, nonce, true);
    out
}

/// How a run with resource limits is confined: in a subshell that first
/// joins its cgroup leaves and sets its rlimits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Confinement<'a> {
    /// `cgroup.procs` files the subshell writes its pid to.
    pub procs: &'a [std::path::PathBuf],
    /// `RLIMIT_AS` in KiB (`ulimit -v`).
    pub address_space_kib: Option<u64>,
}

/// One run, as [`crate::ShellFiles::write_run`] writes it.
#[derive(Clone, Copy, Debug)]
pub struct RunText<'a> {
    /// The run's nonce (tags its status record).
    pub nonce: &'a str,
    /// The run's marker (see [`crate::RunIdentity`]).
    pub marker: &'a str,
    /// The command text, as written.
    pub command: &'a str,
    /// Directory to `cd` into first.
    pub cwd: Option<&'a Path>,
    /// Variables for this call only.
    pub env: &'a [(String, String)],
    /// Whether to report the environment afterwards.
    pub env_record: bool,
    /// The confining subshell of a run with limits.
    pub confinement: Option<Confinement<'a>>,
}

/// One run's wrapper.
#[derive(Clone, Debug)]
pub struct WrapperScript<'a> {
    /// The run (its command text is in `command_file`).
    pub run: RunText<'a>,
    /// File holding the user's command text.
    pub command_file: &'a Path,
    /// The run's output FIFO.
    pub output_fifo: &'a Path,
}

impl WrapperScript<'_> {
    /// The wrapper's text.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(512 + 64 * self.run.env.len());
        out.extend_from_slice(b"\\builtin export ");
        out.extend_from_slice(crate::RUN_MARKER_VAR.as_bytes());
        out.push(b'=');
        push_quoted(&mut out, self.run.marker.as_bytes());
        out.push(b'\n');
        // Remember what the call's variables were, to restore them afterwards.
        for (index, (name, _)) in self.run.env.iter().enumerate() {
            out.extend_from_slice(
                format!("__shv_s{index}=${{{name}+x}} __shv_o{index}=${{{name}-}} __shv_a{index}=${{{name}@a}}\n")
                    .as_bytes(),
            );
        }
        match &self.run.confinement {
            Some(confinement) => {
                out.extend_from_slice(b"( ");
                for procs in confinement.procs {
                    out.extend_from_slice(b"\\builtin printf '%s' \"$BASHPID\" >");
                    push_quoted(&mut out, procs.as_os_str().as_bytes());
                    out.extend_from_slice(b" && ");
                }
                if let Some(kib) = confinement.address_space_kib {
                    out.extend_from_slice(format!("\\builtin ulimit -v {kib} && ").as_bytes());
                }
            }
            None => out.extend_from_slice(b"{ "),
        }
        if let Some(cwd) = self.run.cwd {
            out.extend_from_slice(b"\\builtin cd -- ");
            push_quoted(&mut out, cwd.as_os_str().as_bytes());
            out.extend_from_slice(b" && ");
        }
        for (name, value) in self.run.env {
            out.extend_from_slice(b"\\builtin export ");
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            push_quoted(&mut out, value.as_bytes());
            out.extend_from_slice(b" && ");
        }
        out.extend_from_slice(b"\\builtin . ");
        push_quoted(&mut out, self.command_file.as_os_str().as_bytes());
        out.extend_from_slice(if self.run.confinement.is_some() {
            b"\n) <&63 >"
        } else {
            b"; } <&63 >"
        });
        push_quoted(&mut out, self.output_fifo.as_os_str().as_bytes());
        out.extend_from_slice(
            b" 2>&1 62>&- 63>&-\n__shv_rc=$?\n\\builtin set +euvx +o pipefail +o posix\n",
        );
        for (index, (name, _)) in self.run.env.iter().enumerate() {
            out.extend_from_slice(
                format!(
                    "if [[ -n $__shv_s{index} ]]; then {name}=$__shv_o{index}; \
                     [[ $__shv_a{index} == *x* ]] || \\builtin export -n {name}; \
                     else \\builtin unset -v {name}; fi; \
                     \\builtin unset -v __shv_s{index} __shv_o{index} __shv_a{index}\n"
                )
                .as_bytes(),
            );
        }
        push_records(&mut out, self.run.nonce, self.run.env_record);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confined_run_joins_its_cgroups_in_a_subshell_before_the_command() {
        let procs = [std::path::PathBuf::from("/cg/a b/cgroup.procs")];
        let text = String::from_utf8(
            WrapperScript {
                run: RunText {
                    nonce: "n1",
                    marker: "m.1",
                    command: "",
                    cwd: None,
                    env: &[],
                    env_record: false,
                    confinement: Some(Confinement {
                        procs: &procs,
                        address_space_kib: Some(1024),
                    }),
                },
                command_file: Path::new("/d/c"),
                output_fifo: Path::new("/d/o"),
            }
            .render(),
        )
        .unwrap();
        assert!(
            text.contains(
                "( \\builtin printf '%s' \"$BASHPID\" >'/cg/a b/cgroup.procs' && \\builtin ulimit -v 1024 && \\builtin . '/d/c'\n) <&63 >'/d/o'"
            ),
            "{text}"
        );
    }

    #[test]
    fn init_opens_fd_63_permanently() {
        let text = String::from_utf8(init_script("n", Path::new("/d/w"), None, true)).unwrap();
        assert!(
            text.starts_with("exec 63</dev/null\n\\builtin declare -r __shv_w='/d/w'\n"),
            "{text}"
        );
    }

    #[test]
    fn quoting_wraps_and_escapes_single_quotes() {
        assert_eq!(quote(b"plain"), b"'plain'");
        assert_eq!(quote(b"it's"), b"'it'\\''s'");
        assert_eq!(quote(b""), b"''");
        assert_eq!(
            source_line(Path::new("/d/w")),
            b"\\builtin . '/d/w'\n".to_vec()
        );
    }

    #[test]
    fn wrapper_sources_the_command_inside_redirected_group() {
        let env = vec![("FOO".to_owned(), "a'b".to_owned())];
        let script = WrapperScript {
            run: RunText {
                nonce: "n1",
                marker: "m.1",
                command: "",
                cwd: Some(Path::new("/tmp/x y")),
                env: &env,
                env_record: false,
                confinement: None,
            },
            command_file: Path::new("/d/c"),
            output_fifo: Path::new("/d/o"),
        }
        .render();
        let text = String::from_utf8(script).unwrap();
        assert!(
            text.starts_with("\\builtin export __shv_run='m.1'\n"),
            "{text}"
        );
        assert!(text.contains(
            "{ \\builtin cd -- '/tmp/x y' && \\builtin export FOO='a'\\''b' && \\builtin . '/d/c'; } <&63 >'/d/o' 2>&1 62>&- 63>&-"
        ));
        assert!(text.contains("'n1' \"$__shv_rc\" \"$PWD\" >&62"));
        assert!(text.contains("\\builtin unset -v FOO"));
        assert!(!text.contains("export -p"));
    }
}
