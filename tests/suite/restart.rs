//! The restart budget stops a crash loop without touching other sessions.

use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::ErrorCode;
use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;

#[tokio::test]
async fn a_shell_that_dies_at_start_hits_the_budget_and_reports_shell_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken-bash");
    std::fs::write(&broken, "#!/bin/sh\nexit 1\n").unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&broken).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut config = Config::default();
    config.shell.program = broken;
    config.restart.max_restarts = 3;
    config.restart.window_secs = 30;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("crashloop").await;

    let started = Instant::now();
    let mut last = None;
    for _ in 0..10 {
        match tokio::time::timeout(
            Duration::from_secs(20),
            session.run(RunRequest::new("echo hi")),
        )
        .await
        .unwrap()
        {
            Err(err) if err.code() == ErrorCode::ShellUnavailable => {
                last = Some(err);
                break;
            }
            Err(_) => {}
            Ok(outcome) => {
                let result = outcome.completed().unwrap();
                assert!(
                    result.is_error,
                    "a broken shell cannot run commands: {}",
                    result.text
                );
            }
        }
    }
    let err = last.expect("the budget was never exhausted");
    assert!(err.to_string().starts_with("shell_unavailable: "), "{err}");
    assert!(started.elapsed() < Duration::from_secs(15));
    // No hot loop: nothing is being started any more, and the runtime idles.
    let cpu_before = crate::support::cpu_time();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let busy = crate::support::cpu_time().saturating_sub(cpu_before);
    assert!(busy < Duration::from_millis(50), "{busy:?} of CPU in 1 s");
    let err = session.run(RunRequest::new("echo hi")).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShellUnavailable);
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_crash_looping_session_does_not_affect_another() {
    let rt = TestRuntime::start().await;
    let healthy = rt.session("healthy").await;
    let victim = rt.session("victim").await;
    run(&victim, "export V=1").await;
    // Kill the victim's shell from outside, repeatedly, while it is idle.
    for _ in 0..3 {
        let pid = run(&victim, "echo $$").await.output.trim().to_owned();
        std::process::Command::new("kill")
            .args(["-9", &pid])
            .status()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(run(&healthy, "echo fine").await.output, "fine\n");
    }
    assert_eq!(run(&victim, "echo back $V").await.output, "back 1\n");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_session_that_breaks_its_path_still_gets_a_new_shell() {
    let rt = TestRuntime::start().await;
    let session = rt.session("no-path").await;
    let first = run(&session, "export PATH=/nonexistent; echo $$")
        .await
        .output;
    // The shell exits with PATH pointing nowhere; the replayed state keeps
    // that PATH, but the runtime found bash once, at start.
    let exited = session
        .run(RunRequest::new("exit 3"))
        .await
        .unwrap()
        .completed()
        .unwrap();
    assert_eq!(exited.exit_code, Some(3), "{}", exited.text);
    let next = run(&session, "echo $$ $PATH").await;
    assert!(!next.is_error, "{}", next.text);
    let (pid, path) = next.output.trim().split_once(' ').unwrap();
    assert_ne!(pid, first.trim(), "a new shell");
    assert_eq!(path, "/nonexistent", "its state is the session's");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_shell_that_is_not_on_the_path_fails_the_start_with_its_name() {
    let mut config = Config::default();
    config.shell.program = "no-such-bash-for-shellvisor".into();
    let err = shellvisor::Runtime::start(config).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::SpawnFailed);
    assert_eq!(
        err.to_string(),
        "failed to start the shell: no-such-bash-for-shellvisor not found on PATH"
    );
}
