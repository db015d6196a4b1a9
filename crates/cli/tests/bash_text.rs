//! `shellvisor run` reads bash as bash: what it rewrites means what the
//! user wrote, what it cannot prove equivalent runs as written, and nothing
//! a command does to its own shell hangs the call or loses output.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::process::Output;
use std::time::Duration;
use std::time::Instant;

fn shellvisor() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shellvisor"));
    command.env_remove("SHELLVISOR_CONFIG");
    command
}

/// Runs `script` with `shellvisor run` in `cwd` (deadline 30 s).
fn run_in(cwd: &Path, script: &str) -> Output {
    shellvisor()
        .args(["run", "--timeout", "30", "--cwd"])
        .arg(cwd)
        .args(["--", script])
        .output()
        .unwrap()
}

/// `shellvisor run` started in `cwd`, without `--cwd`: the request has no
/// directory of its own, the case where a leading `cd` was rewritten.
fn run_from(cwd: &Path, script: &str) -> Output {
    shellvisor()
        .args(["run", "--timeout", "30", "--", script])
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Defect 1: a `local://` URL is a shell word (or part of one); the
/// punctuation after it stays bash's.
#[test]
fn local_urls_end_where_bash_ends_the_word() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        (
            "echo ok > local://f.txt; echo next; cat local://f.txt",
            "next\nok\n",
        ),
        (
            "echo hi > local://f.txt; cat local://f.txt|tr a-z A-Z",
            "HI\n",
        ),
        (
            "echo hi > local://f.txt; cat local://f.txt&&echo ok",
            "hi\nok\n",
        ),
        ("echo hi > local://f.txt; cat local://f.txt&wait", "hi\n"),
        ("echo hi >local://f.txt; (cat local://f.txt)", "hi\n"),
        (
            "echo a > local://f.txt; for f in local://f.txt; do cat \"$f\"; done",
            "a\n",
        ),
        ("echo b > local://f.txt; x=local://f.txt; cat $x", "b\n"),
        (
            "echo c > 'local://with space.txt'; cat local://with\\ space.txt",
            "c\n",
        ),
        // Not a URL to bash: quoted mid-word, or inside a heredoc body.
        ("echo 'see local://f.txt'", "see local://f.txt\n"),
        ("cat <<'EOF'\nlocal://f.txt\nEOF", "local://f.txt\n"),
    ];
    for (script, want) in cases {
        let output = run_in(dir.path(), script);
        assert_eq!(stdout(&output), *want, "{script}");
        assert_eq!(output.status.code(), Some(0), "{script}: {output:?}");
    }
    // No file was created under a name that swallowed the punctuation.
    let made: Vec<String> = walk(dir.path());
    assert!(
        made.iter()
            .all(|name| !name.contains(';') && !name.contains('|')),
        "{made:?}"
    );
}

fn walk(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        names.push(entry.file_name().to_string_lossy().into_owned());
        if entry.file_type().unwrap().is_dir() {
            names.extend(walk(&entry.path()));
        }
    }
    names
}

/// Defect 2: the leading-`cd` rewrite refuses nothing; what it cannot
/// prove equivalent runs as written, and bash reports its own errors.
#[test]
fn leading_cd_forms_run_as_bash_runs_them() {
    let dir = tempfile::tempdir().unwrap();
    let spaced = dir.path().canonicalize().unwrap().join("d/with space");
    std::fs::create_dir_all(&spaced).unwrap();
    let spaced = spaced.display().to_string();
    let escaped = spaced.replace(' ', "\\ ");
    let cases: Vec<(String, String)> = vec![
        ("cd -P /usr && pwd".into(), "/usr\n".into()),
        ("cd -- /usr && pwd".into(), "/usr\n".into()),
        ("cd /usr;pwd && echo semi".into(), "/usr\nsemi\n".into()),
        ("cd /us* && pwd".into(), "/usr\n".into()),
        (format!("cd {escaped} && pwd"), format!("{spaced}\n")),
        (format!("cd '{spaced}' && pwd"), format!("{spaced}\n")),
        ("cd ~root && pwd".into(), "/root\n".into()),
        ("cd /usr || echo no; pwd".into(), "/usr\n".into()),
        (
            "cd /nonexist && echo yes || echo fallback".into(),
            "bash: line 1: cd: /nonexist: No such file or directory\nfallback\n".into(),
        ),
    ];
    for (script, want) in &cases {
        for output in [run_in(dir.path(), script), run_from(dir.path(), script)] {
            assert_eq!(stdout(&output), *want, "{script}");
            assert_eq!(output.status.code(), Some(0), "{script}: {output:?}");
        }
    }
}

/// Defect 4: a command that disables or shadows what the wrapper needs
/// ends promptly, says so, and loses what it printed.
#[test]
fn a_command_that_breaks_the_wrapper_ends_at_once_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    for (script, printed) in [
        ("enable -n printf; echo x", "x\n"),
        ("builtin() { return 7; }; echo defined", "defined\n"),
        ("set -n; echo x", ""),
    ] {
        let started = Instant::now();
        let output = run_in(dir.path(), script);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(20), "{script}: {took:?}");
        assert_eq!(stdout(&output), printed, "{script}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        // `enable -n printf` also garbles the status channel, which is
        // caught first; either way the run ends at once with a notice.
        assert!(
            stderr.contains("The shell was lost before the command finished")
                && stderr.contains("the shell is replaced"),
            "{script}: {stderr}"
        );
        assert_ne!(output.status.code(), Some(0), "{script}");
    }
}

/// Defect 5: what an EXIT trap prints as the shell exits is the run's.
#[test]
fn exit_trap_output_belongs_to_the_run_that_ended_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..5 {
        let output = run_in(dir.path(), "trap 'echo bye' EXIT; echo body; exit 3");
        assert_eq!(stdout(&output), "body\nbye\n");
        assert_eq!(output.status.code(), Some(3));
    }
}

/// Error messages of the command's own parse name bash, not the runtime's files.
#[test]
fn bash_errors_read_as_bash_prints_them() {
    let dir = tempfile::tempdir().unwrap();
    let output = run_in(dir.path(), "echo ok\nif then");
    assert_eq!(
        stdout(&output),
        "ok\nbash: line 2: syntax error near unexpected token `then'\nbash: line 2: `if then'\n"
    );
    let output = run_in(dir.path(), "nosuchcommand_xyz");
    assert_eq!(
        stdout(&output),
        "bash: line 1: nosuchcommand_xyz: command not found\n"
    );
    assert_eq!(output.status.code(), Some(127));
}

/// Defect 8: a closed stdout ends any subcommand quietly.
#[test]
fn a_closed_pipe_ends_every_subcommand_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    for args in [
        &["schema"][..],
        &["run", "--", "seq 1 1000000"][..],
        &["--help"][..],
    ] {
        let mut child = shellvisor()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 100];
        stdout.read_exact(&mut first).unwrap();
        drop(stdout);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        assert!(
            status.code().is_some(),
            "{args:?} died of a signal: {status:?}"
        );
    }
}

/// The bash parser logs what it reads at debug level: the binary turns
/// that off, so even a trace log carries no command text.
#[test]
fn a_trace_log_carries_no_command_text() {
    let output = shellvisor()
        .env("SHELLVISOR_LOG", "trace")
        .args([
            "run",
            "--",
            "cd /tmp && echo SECRET_TOKEN_1 $((6*7)) > local://s.txt; cat local://s.txt",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "SECRET_TOKEN_1 42\n"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("TRACE") || stderr.contains("DEBUG"),
        "no log at all: {stderr}"
    );
    assert!(!stderr.contains("SECRET_TOKEN_1"), "{stderr}");
}
