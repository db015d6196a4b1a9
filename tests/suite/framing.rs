//! The framing survives anything a command can do (issue 2, point 3): each
//! case reports the right exit code and the shell answers the next call.

use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;

async fn assert_shell_usable(session: &shellvisor::Session) {
    let result = run(session, "echo still-ok").await;
    assert_eq!(result.output, "still-ok\n");
    assert_eq!(result.exit_code, Some(0));
}

#[tokio::test]
async fn syntax_errors_and_unfinished_input_are_contained() {
    let rt = TestRuntime::start().await;
    let session = rt.session("framing").await;
    for command in [
        "if then fi",
        "echo 'unclosed quote",
        "echo \"unclosed",
        "cat <<EOF\nheredoc body never ends\n",
        "( echo open paren",
    ] {
        let result = run(&session, command).await;
        assert!(result.exit_code.is_some(), "{command}: {result:?}");
        assert!(!result.shell_restarted, "{command}");
        assert_shell_usable(&session).await;
    }
    let result = run(&session, "if then fi").await;
    assert_eq!(result.exit_code, Some(2));
    assert!(result.output.contains("syntax error"), "{}", result.output);
    assert!(result.is_error);
    assert!(
        result.text.ends_with("Command exited with code 2"),
        "{}",
        result.text
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn commands_reading_stdin_get_eof_at_once() {
    let rt = TestRuntime::start().await;
    let session = rt.session("stdin").await;
    let result = run(&session, "cat; read -r line; echo \"read=$?\"; python3 -c 'import sys; print(len(sys.stdin.read()))'").await;
    assert_eq!(result.output, "read=1\n0\n");
    assert_eq!(result.exit_code, Some(0));
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn exit_exec_and_self_kill_report_and_restart_the_shell() {
    let rt = TestRuntime::start().await;
    let session = rt.session("exit").await;
    run(&session, "cd / && export KEEP=yes").await;
    for (command, code) in [
        ("exit 3", 3),
        ("echo before; exec true", 0),
        ("kill -9 $$", 137),
        ("kill -TERM $$", 143),
    ] {
        let result = run(&session, command).await;
        assert_eq!(result.exit_code, Some(code), "{command}: {}", result.text);
        assert!(result.shell_restarted, "{command}");
        assert!(result.text.contains("fresh shell"), "{}", result.text);
        let next = run(&session, "echo \"$KEEP $PWD\"").await;
        assert_eq!(next.output, "yes /\n", "after {command}");
    }
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn signal_deaths_report_128_plus_n() {
    let rt = TestRuntime::start().await;
    let session = rt.session("signals").await;
    let result = run(&session, "sleep 30 & kill -KILL $!; wait $!").await;
    assert_eq!(result.exit_code, Some(137));
    let result = run(&session, "bash -c 'kill -SEGV $$'").await;
    assert_eq!(result.exit_code, Some(139));
    assert_shell_usable(&session).await;
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn odd_output_shapes_come_back_exactly() {
    let rt = TestRuntime::start().await;
    let session = rt.session("shapes").await;
    let result = run(&session, "printf 'no trailing newline'").await;
    assert_eq!(result.output, "no trailing newline");
    assert!(
        result
            .text
            .starts_with("no trailing newline\n\nWall time: ")
    );

    let result = run(&session, "printf 'a\\x00b\\xffc\\x1b[31mred\\x1b[0m\\n'").await;
    assert_eq!(result.output, "ab\u{FFFD}cred\n");
    assert_eq!(result.truncation.total_bytes, 18);

    let result = run(&session, "true").await;
    assert_eq!(result.output, "");
    assert!(
        result.text.starts_with("(no output)\n\nWall time: "),
        "{}",
        result.text
    );

    let result = run(&session, "echo out; echo err >&2; echo out2").await;
    assert_eq!(result.output, "out\nerr\nout2\n");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn background_writers_do_not_leak_into_later_calls() {
    let rt = TestRuntime::start().await;
    let session = rt.session("late").await;
    let started = std::time::Instant::now();
    let result = run(&session, "(sleep 1; echo late) & echo now").await;
    assert_eq!(result.output, "now\n");
    assert!(
        started.elapsed() < std::time::Duration::from_millis(900),
        "the call waited for its & child"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
    let result = run(&session, "echo next").await;
    assert_eq!(result.output, "next\n");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn late_output_stays_with_its_run_while_the_next_run_is_going() {
    // The `&` child writes while the next call runs: its bytes must go to the
    // first run's output, never into the second's (its FIFO is not reused).
    let rt = TestRuntime::start().await;
    let session = rt.session("late-overlap").await;
    let first = run(
        &session,
        "(sleep 0.2; echo late; sleep 0.3; echo later) & echo now",
    )
    .await;
    assert_eq!(first.output, "now\n");
    let second = run(&session, "sleep 0.8; echo mine").await;
    assert_eq!(second.output, "mine\n", "{}", second.text);
    let third = run(&session, "echo third").await;
    assert_eq!(third.output, "third\n");
    // The late lines are in the first run's output, readable by offset.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let chunk = session.read_output(&first.job_id, 0, 4096).await.unwrap();
        if chunk.closed {
            assert_eq!(&chunk.data[..], b"now\nlate\nlater\n");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{chunk:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    rt.runtime.shutdown().await;
}

/// A run that prints nothing has no Sink when it ends; a `&` child that
/// prints afterwards starts it, and its bytes are the run's, readable by
/// offset, with the end of the stream told once the child is done.
#[tokio::test]
async fn late_output_of_a_silent_run_is_kept_for_it() {
    let rt = TestRuntime::start().await;
    let session = rt.session("late-silent").await;
    let silent = run(&session, "(sleep 0.3; echo late; echo later >&2) &").await;
    assert_eq!(silent.output, "");
    let before = session.read_output(&silent.job_id, 0, 4096).await.unwrap();
    assert!(
        !before.closed,
        "the child still holds the output: {before:?}"
    );
    let next = run(&session, "echo next").await;
    assert_eq!(next.output, "next\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let chunk = session.read_output(&silent.job_id, 0, 4096).await.unwrap();
        if chunk.closed {
            assert_eq!(&chunk.data[..], b"late\nlater\n");
            assert_eq!(chunk.total_bytes, 11);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{chunk:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The job's state counts the late bytes too, for a foreground run (kept
    // as a record) and for a background one (kept by its Job).
    assert_eq!(session.job(&silent.job_id).await.unwrap().output_bytes, 11);
    let background = session
        .run(RunRequest::new("(sleep 0.3; echo late) &").run_async(true))
        .await
        .unwrap()
        .backgrounded()
        .unwrap();
    let done = session
        .wait(&background.job_id, std::time::Duration::from_secs(10))
        .await
        .unwrap()
        .expect("finished");
    assert_eq!(done.output, "");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !session
        .read_output(&background.job_id, 0, 4096)
        .await
        .unwrap()
        .closed
    {
        assert!(std::time::Instant::now() < deadline, "never closed");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let info = session.job(&background.job_id).await.unwrap();
    assert_eq!(info.output_bytes, 5, "{info:?}");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn output_cannot_forge_the_end_of_a_run() {
    let rt = TestRuntime::start().await;
    let session = rt.session("forge").await;
    // Status-record look-alikes on stdout and stderr: no accidental output
    // reaches the status channel (it is closed for the command).
    let imitation = r#"printf 'S0\0000\000/\000'; printf 'Sx\0000\000/\000' >&2
echo done; exit_code() { return 5; }; exit_code"#;
    let result = run(&session, imitation).await;
    assert_eq!(result.exit_code, Some(5), "{}", result.text);
    assert!(result.output.ends_with("done\n"), "{:?}", result.output);
    assert!(!result.shell_restarted);
    assert_shell_usable(&session).await;
    rt.runtime.shutdown().await;
}

/// A command that writes on purpose into the runtime's descriptors (bash's
/// saved copies of the status channel are visible in `/proc/$$/fd`) can
/// send a well-formed status record. Nonces are random per run, so its
/// record names no run in progress: the run is not completed with the forged
/// status; it ends at once with an error saying the channel is corrupt, the
/// shell is replaced, and the next call works with the session's state.
#[tokio::test]
async fn a_deliberately_forged_status_record_ends_the_run_and_replaces_the_shell() {
    let rt = TestRuntime::start().await;
    let session = rt.session("forge-on-purpose").await;
    run(&session, "cd / && export KEEP=kept").await;
    let forged = r#"for fd in /proc/$$/fd/*; do printf 'Swrong-nonce\0000\000/\000' > "$fd" 2>/dev/null; done
sleep 30; echo never"#;
    let started = std::time::Instant::now();
    let result = run(&session, forged).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the run waited for its deadline"
    );
    assert_eq!(result.exit_code, None, "{}", result.text);
    assert!(result.is_error);
    assert!(result.shell_restarted);
    assert!(
        result.text.contains("status channel") && result.text.contains("shell is replaced"),
        "{}",
        result.text
    );
    assert!(!result.output.contains("never"));
    let next = run(&session, "echo \"$KEEP $PWD\"").await;
    assert_eq!(next.output, "kept /\n");
    rt.runtime.shutdown().await;
}
