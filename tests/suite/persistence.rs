//! cwd and exported variables persist from call to call, as in a terminal.

use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

#[tokio::test]
async fn cwd_variables_and_functions_persist() {
    let rt = TestRuntime::start().await;
    let session = rt.session("persist").await;
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    let result = run(
        &session,
        &format!(
            "cd '{}' && export PERSIST_A='a b' && PLAIN=1 && greet() {{ echo hello \"$1\"; }}",
            dir_path.display()
        ),
    )
    .await;
    assert_eq!(result.cwd.as_deref(), Some(dir_path.to_str().unwrap()));
    let result = run(&session, "pwd; echo \"$PERSIST_A|$PLAIN\"; greet you").await;
    assert_eq!(
        result.output,
        format!("{}\na b|1\nhello you\n", dir_path.display())
    );
    let result = run(&session, "bash -c 'echo child sees $PERSIST_A'").await;
    assert_eq!(result.output, "child sees a b\n");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn per_call_env_and_cwd() {
    let rt = TestRuntime::start().await;
    let session = rt.session("percall").await;
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    std::fs::create_dir(dir_path.join("sub")).unwrap();
    run(
        &session,
        &format!("cd '{}' && export SHARED=session", dir_path.display()),
    )
    .await;

    let request = RunRequest::new("echo \"$CALL_VAR|$SHARED\"; export CALL_VAR=changed")
        .env("CALL_VAR", "it's \"quoted\" $HOME")
        .env("SHARED", "overridden");
    let result = run_request(&session, request).await;
    assert_eq!(result.output, "it's \"quoted\" $HOME|overridden\n");
    let result = run(&session, "echo \"${CALL_VAR-unset}|$SHARED\"").await;
    assert_eq!(
        result.output, "unset|session\n",
        "a call's env does not outlive the call"
    );

    let result = run_request(&session, RunRequest::new("pwd").cwd("sub")).await;
    assert_eq!(result.output, format!("{}/sub\n", dir_path.display()));
    let result = run(&session, "pwd").await;
    assert_eq!(
        result.output,
        format!("{}/sub\n", dir_path.display()),
        "cwd behaves like cd"
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn script_options_do_not_leak_between_calls() {
    let rt = TestRuntime::start().await;
    let session = rt.session("options").await;
    let result = run(&session, "set -euo pipefail; echo in-strict-mode").await;
    assert_eq!(result.exit_code, Some(0));
    let result = run(
        &session,
        "false; echo $UNSET_VARIABLE; false | true; echo survived",
    )
    .await;
    assert_eq!(result.output, "\nsurvived\n");
    assert_eq!(result.exit_code, Some(0));
    assert!(!result.shell_restarted);
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn posix_mode_does_not_make_a_later_syntax_error_end_the_shell() {
    let rt = TestRuntime::start().await;
    let session = rt.session("posix").await;
    let pid = run(&session, "set -o posix; KEPT=1; echo $$").await.output;
    let broken = run(&session, "if then").await;
    assert_eq!(broken.exit_code, Some(2), "{}", broken.text);
    assert!(!broken.shell_restarted, "{}", broken.text);
    let after = run(&session, "echo $$ $KEPT; shopt -qo posix || echo not-posix").await;
    assert_eq!(after.output, format!("{} 1\nnot-posix\n", pid.trim()));
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn non_interactive_environment_is_set() {
    let rt = TestRuntime::start().await;
    let session = rt.session("env").await;
    let result = run(&session, "echo \"$PAGER $GIT_PAGER $TERM $GIT_TERMINAL_PROMPT $DEBIAN_FRONTEND $CI\"; [ -z \"${BASH_ENV-}\" ] && echo no-bash-env").await;
    assert_eq!(
        result.output,
        "cat cat dumb 0 noninteractive 1\nno-bash-env\n"
    );
    let result = run(&session, ": </dev/tty").await;
    assert_ne!(
        result.exit_code,
        Some(0),
        "no controlling terminal: /dev/tty prompts fail fast"
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn exports_made_through_functions_and_sourced_files_survive_a_restart() {
    let rt = TestRuntime::start().await;
    let session = rt.session("snapshot").await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("env.sh");
    std::fs::write(
        &script,
        "export FROM_SOURCE=sourced\nshv_test_setenv() { export FROM_FN=called; }\n",
    )
    .unwrap();
    run(&session, &format!(". '{}'", script.display())).await;
    // A plain command first: it cannot change the environment, so no snapshot is taken.
    run(&session, "ls >/dev/null").await;
    // Calling a known function may change it: a snapshot follows.
    run(&session, "shv_test_setenv").await;
    run(&session, "true").await;
    let result = run(&session, "kill -9 $$").await;
    assert!(result.shell_restarted);
    let result = run(
        &session,
        "echo \"$FROM_SOURCE $FROM_FN\"; type shv_test_setenv >/dev/null 2>&1 || echo no-functions",
    )
    .await;
    assert_eq!(
        result.output, "sourced called\nno-functions\n",
        "exported variables survive; functions do not (documented)"
    );
    rt.runtime.shutdown().await;
}
