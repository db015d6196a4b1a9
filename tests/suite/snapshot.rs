//! The user's shell snapshot and a session's init: what the user's rc file
//! defines, and what a session sets up, are there in every new shell; a
//! broken rc or init costs a warning, never a session.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::RunRequest;
use shellvisor::SessionOptions;
use shellvisor::SnapshotSource;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

/// A home directory with `.bashrc` `rc`, and a `bin/mytool` program.
fn home_with_rc(rc: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".bashrc"), rc).unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("mytool");
    std::fs::write(&tool, "#!/bin/sh\necho tool ran\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    home
}

/// A configuration with `HOME` at `home`, the snapshot on, and the runtime's
/// files under `runtime_parent`.
fn config_for(home: &Path, runtime_parent: &Path) -> Config {
    let mut config = Config::default();
    config.shell.snapshot = SnapshotSource::Bashrc;
    config
        .shell
        .env
        .insert("HOME".to_owned(), home.display().to_string());
    config.runtime_dir = Some(runtime_parent.to_path_buf());
    config
}

/// Every `snapshot.sh` under `dir`.
fn snapshot_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|name| name == "snapshot.sh") {
                found.push(path);
            }
        }
    }
    found
}

const RC: &str = r#"# like Debian's: nothing for a non-interactive shell
case $- in *i*) ;; *) return;; esac
export FOO=from-rc
export PAGER=less
greet() { echo "hello $FOO, paging with $PAGER"; }
_helper() { echo helper; }
alias ll='echo listing'
shopt -s extglob
export PATH="$HOME/bin:$PATH"
"#;

#[tokio::test]
async fn the_users_rc_is_in_every_new_shell_and_its_file_is_private_and_removed() {
    let home = home_with_rc(RC);
    let runtime_parent = tempfile::tempdir().unwrap();
    let rt = TestRuntime::with_config(config_for(home.path(), runtime_parent.path())).await;
    assert_eq!(rt.runtime.warnings(), Vec::<String>::new());
    let files = snapshot_files(runtime_parent.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(files[0].parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);

    let session = rt.session("snap").await;
    let globs = tempfile::tempdir().unwrap();
    std::fs::write(globs.path().join("a.txt"), "").unwrap();
    std::fs::write(globs.path().join("b.log"), "").unwrap();
    let script = format!(
        "greet; ll; mytool; cd '{}' && echo !(*.log); type -t _helper || echo no helper",
        globs.path().display()
    );
    let result = run(&session, &script).await;
    assert_eq!(
        result.output, "hello from-rc, paging with cat\nlisting\ntool ran\na.txt\nno helper\n",
        "the guard's PAGER wins over the rc's; {:?}",
        result.notices
    );

    // A session's own value is kept when a new shell replays the snapshot
    // (the run below times out, so the next one gets a fresh shell).
    run(&session, "export FOO=mine").await;
    let timed_out = run_request(&session, RunRequest::new("sleep 30").timeout_secs(1)).await;
    assert!(timed_out.timed_out);
    let result = run(
        &session,
        "greet; ll; echo \"$PATH\" | tr ':' '\\n' | grep -c mytool-never; mytool",
    )
    .await;
    assert_eq!(
        result.output, "hello mine, paging with cat\nlisting\n0\ntool ran\n",
        "{:?}",
        result.notices
    );
    let path = run(
        &session,
        "echo \"$PATH\" | tr ':' '\\n' | grep -cx \"$HOME/bin\"",
    )
    .await;
    assert_eq!(path.output, "1\n", "the rc's PATH entry is there once");

    rt.runtime.shutdown().await;
    assert!(!files[0].exists(), "the snapshot outlived the runtime");
}

#[tokio::test]
async fn an_rc_that_hangs_exits_or_is_missing_costs_a_warning_not_a_session() {
    for (rc, code) in [
        (
            Some("case $- in *i*) ;; *) return;; esac\nsleep 10\ngreet() { :; }\n"),
            "snapshot_timed_out",
        ),
        (Some("exit 1\n"), "snapshot_rc_failed"),
        (None, "snapshot_rc_unreadable"),
    ] {
        let home = home_with_rc(rc.unwrap_or(""));
        if rc.is_none() {
            std::fs::remove_file(home.path().join(".bashrc")).unwrap();
        }
        let runtime_parent = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let rt = TestRuntime::with_config(config_for(home.path(), runtime_parent.path())).await;
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{code}: the start waited {:?}",
            started.elapsed()
        );
        let warnings = rt.runtime.warnings();
        assert!(
            warnings.iter().any(|warning| warning.contains(code)),
            "{code}: {warnings:?}"
        );
        assert!(snapshot_files(runtime_parent.path()).is_empty(), "{code}");
        let session = rt.session("broken-rc").await;
        let result = run(&session, "echo works; type -t greet || echo no greet").await;
        assert_eq!(result.output, "works\nno greet\n", "{code}");
        // The rc's `sleep 10` was killed with its throwaway shell.
        rt.assert_only_idle_shells_within(Duration::from_secs(5))
            .await;
        rt.runtime.shutdown().await;
    }
}

#[tokio::test]
async fn a_sessions_init_runs_in_every_new_shell_before_its_first_command() {
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    std::fs::create_dir(dir_path.join("project")).unwrap();
    let mut config = Config::default();
    config.shell.cwd = Some(dir_path.clone());
    config.shell.init = Some("export FROM_CONFIG=1".to_owned());
    let rt = TestRuntime::with_config(config).await;

    // The configured init, for a session opened without one.
    let plain = rt.session("plain").await;
    assert_eq!(run(&plain, "echo $FROM_CONFIG").await.output, "1\n");

    // New shells start where the session is: an init that changes directory
    // names it in full.
    let init = format!(
        "cd '{}/project' && export INITV=set && helper() {{ echo \"helper in $PWD\"; }}",
        dir_path.display()
    );
    let session = rt
        .runtime
        .session_with("init", SessionOptions::init(init))
        .await
        .unwrap();
    let result = run(&session, "echo \"${FROM_CONFIG-unset} $INITV\"; helper").await;
    assert_eq!(
        result.output,
        format!("unset set\nhelper in {}/project\n", dir_path.display())
    );
    assert!(result.notices.is_empty(), "{:?}", result.notices);
    // A new shell (the run times out) runs it again: the function, which
    // no environment carries, is there.
    let timed_out = run_request(&session, RunRequest::new("sleep 30").timeout_secs(1)).await;
    assert!(timed_out.timed_out);
    assert_eq!(
        run(&session, "helper").await.output,
        format!("helper in {}/project\n", dir_path.display())
    );
    // An async run's own shell too.
    let outcome = session
        .run(RunRequest::new("helper").run_async(true))
        .await
        .unwrap();
    let job = match outcome {
        shellvisor::RunOutcome::Backgrounded(job) => job.job_id,
        other => panic!("not started in the background: {other:?}"),
    };
    let result = session
        .wait(&job, Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(
        result.output.starts_with("helper in "),
        "{:?}",
        result.output
    );
    assert_eq!(rt.runtime.warnings(), Vec::<String>::new());
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_failing_init_is_reported_once_and_a_hanging_one_is_abandoned() {
    let mut config = Config::default();
    config.shell.init_timeout_ms = 1_000;
    let rt = TestRuntime::with_config(config).await;

    let failing = rt
        .runtime
        .session_with(
            "failing",
            SessionOptions::init("export PART=1\nno-such-command-xyz\n"),
        )
        .await
        .unwrap();
    let first = run(&failing, "echo \"part=$PART\"").await;
    assert_eq!(
        first.output, "part=1\n",
        "what ran before the failure stays"
    );
    let notice = first.notices.join("\n");
    assert!(notice.contains("init exited with status 127"), "{notice}");
    assert!(
        notice.contains("init: line 2: no-such-command-xyz: command not found"),
        "{notice}"
    );
    let second = run(&failing, "true").await;
    assert!(second.notices.is_empty(), "told once: {:?}", second.notices);

    let tries = tempfile::tempdir().unwrap();
    for (id, rest) in [("hanging", "sleep 30"), ("exiting", "exit 3")] {
        let count = tries.path().join(id);
        let init = format!("echo try >> '{}'; {rest}", count.display());
        let started = Instant::now();
        let session = rt
            .runtime
            .session_with(id, SessionOptions::init(init))
            .await
            .unwrap();
        let result = run(&session, "echo works").await;
        assert_eq!(result.output, "works\n", "{id}");
        assert!(
            result
                .notices
                .iter()
                .any(|n| n.contains("init was abandoned")),
            "{id}: {:?}",
            result.notices
        );
        assert!(started.elapsed() < Duration::from_secs(15), "{id}");
        // Later shells start without it.
        let timed_out = run_request(&session, RunRequest::new("sleep 30").timeout_secs(1)).await;
        assert!(timed_out.timed_out);
        assert_eq!(run(&session, "echo again").await.output, "again\n");
        assert_eq!(std::fs::read_to_string(&count).unwrap(), "try\n", "{id}");
    }
    let warnings = rt.runtime.warnings();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[0].starts_with("session failing: "), "{warnings:?}");
    rt.assert_no_sleepers_within(Duration::from_secs(5)).await;

    assert!(
        rt.runtime
            .session_with("nul", SessionOptions::init("a\0b"))
            .await
            .is_err()
    );
    rt.runtime.shutdown().await;
}
