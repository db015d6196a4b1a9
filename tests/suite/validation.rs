//! Bad input gets a clear error and changes nothing.

use shellvisor::Error;
use shellvisor::ErrorCode;
use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;

#[tokio::test]
async fn invalid_requests_are_refused_with_the_reference_messages() {
    let rt = TestRuntime::start().await;
    let session = rt.session("validation").await;
    let err = session
        .run(RunRequest::new("echo hi").env("1BAD", "x"))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Invalid bash env name: 1BAD");
    assert_eq!(err.code(), ErrorCode::InvalidEnvName);
    let err = session
        .run(RunRequest::new("echo hi").env("BASH_ENV", "/tmp/x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ReservedEnvName);
    let err = session
        .run(RunRequest::new("echo hi").cwd("/definitely/not/here"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::CwdNotFound {
            path: "/definitely/not/here".into()
        }
    );
    let err = session
        .run(RunRequest::new("echo hi").cwd("/etc/hostname"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Working directory is not a directory: /etc/hostname"
    );
    let err = session.run(RunRequest::new("echo a\0b")).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    // Nothing ran, and the session is fine.
    assert_eq!(run(&session, "echo ok").await.output, "ok\n");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_pty_request_with_terminals_off_runs_without_one_and_says_so() {
    let mut config = shellvisor::Config::default();
    config.pty.enabled = false;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("pty").await;
    let result = crate::support::run_request(&session, RunRequest::new("echo hi").pty(true)).await;
    assert_eq!(result.output, "hi\n");
    assert!(
        result
            .notices
            .iter()
            .any(|n| n
                == "pty requested but unavailable in this environment; ran without a terminal")
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn calls_after_shutdown_are_refused() {
    let rt = TestRuntime::start().await;
    let session = rt.session("late").await;
    rt.runtime.shutdown().await;
    let err = session.run(RunRequest::new("echo hi")).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShuttingDown);
    assert_eq!(
        rt.runtime.session("other").await.unwrap_err().code(),
        ErrorCode::ShuttingDown
    );
}
