//! Request policy end to end: the leading cd rewrite, the interceptor,
//! internal URLs, and golden result texts.

use std::collections::BTreeMap;
use std::time::Duration;

use shellvisor::Config;
use shellvisor::ErrorCode;
use shellvisor::RunRequest;
use shellvisor::Runtime;
use shellvisor::SkillResolver;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

#[tokio::test]
async fn a_leading_cd_becomes_the_cwd_only_when_that_is_exactly_what_bash_would_do() {
    let rt = TestRuntime::start().await;
    let session = rt.session("cd").await;
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    std::fs::create_dir(dir_path.join("with space")).unwrap();
    let result = run(
        &session,
        &format!("cd '{}/with space' && pwd", dir_path.display()),
    )
    .await;
    assert_eq!(
        result.output,
        format!("{}/with space\n", dir_path.display())
    );
    // A directory that cannot be entered is bash's to report: the command
    // runs as written, so its `||` branch still runs.
    let result = run(
        &session,
        &format!(
            "cd {}/missing && echo yes || echo fallback",
            dir_path.display()
        ),
    )
    .await;
    assert_eq!(
        result.output,
        format!(
            "bash: line 1: cd: {}/missing: No such file or directory\nfallback\n",
            dir_path.display()
        )
    );
    assert_eq!(result.exit_code, Some(0));
    // Forms the rewrite refuses run as written.
    let result = run(&session, "cd $HOME && echo expanded-by-bash").await;
    assert_eq!(result.output, "expanded-by-bash\n");
    // An explicit cwd wins over the rewrite.
    let request = RunRequest::new("cd / && pwd").cwd(dir_path.display().to_string());
    assert_eq!(run_request(&session, request).await.output, "/\n");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn the_interceptor_steers_when_enabled_and_lets_bypasses_through() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let mut config = Config::default();
    config.shell.cwd = Some(dir.path().to_path_buf());
    let rt = TestRuntime::with_config(config.clone()).await;
    let session = rt.session("off").await;
    assert_eq!(
        run(&session, "cat notes.txt").await.output,
        "hello\n",
        "off by default"
    );
    rt.runtime.shutdown().await;

    config.policy.interceptor.enabled = true;
    config.policy.interceptor.tools = vec!["read".into(), "write".into()];
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("on").await;
    let err = session
        .run(RunRequest::new("cat notes.txt"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Blocked);
    assert_eq!(
        err.to_string(),
        "Blocked: Use the `read` tool instead of cat/head/tail. It provides better context and handles binary files.\n\nOriginal command: cat notes.txt"
    );
    let err = session
        .run(RunRequest::new(format!(
            "cd {} && head notes.txt",
            dir.path().display()
        )))
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode::Blocked,
        "the cd-stripped command is checked"
    );
    // grep is not among the host's tools: its rule does not fire.
    assert_eq!(
        run(&session, "grep hello notes.txt").await.output,
        "hello\n"
    );
    // Not a security boundary: these reach cat anyway.
    for bypass in [
        "command cat notes.txt",
        "\\cat notes.txt",
        "/bin/cat notes.txt",
        "env cat notes.txt",
        "FOO=1 cat notes.txt",
    ] {
        assert_eq!(run(&session, bypass).await.output, "hello\n", "{bypass}");
    }
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn internal_urls_expand_in_commands_env_and_cwd() {
    let skills = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(skills.path().join("review")).unwrap();
    std::fs::write(skills.path().join("review/SKILL.md"), "review carefully\n").unwrap();
    let mut config = Config::default();
    config.shell.cwd = Some(std::env::temp_dir());
    let runtime = Runtime::builder(config)
        .url_resolver(SkillResolver::new(BTreeMap::from([(
            "review".to_owned(),
            skills.path().join("review"),
        )])))
        .start()
        .await
        .unwrap();
    let session = runtime.session("urls").await.unwrap();

    let result = run(
        &session,
        "echo 'it'\\''s mine' > local://notes/today.md && cat 'local://notes/today.md'",
    )
    .await;
    assert_eq!(result.output, "it's mine\n");
    let result = run_request(
        &session,
        RunRequest::new("cat \"$NOTE\"").env("NOTE", "local://notes/today.md"),
    )
    .await;
    assert_eq!(result.output, "it's mine\n");
    let result = run_request(&session, RunRequest::new("pwd").cwd("local://notes")).await;
    assert!(
        result.output.trim_end().ends_with("/local/notes"),
        "{}",
        result.output
    );
    assert_eq!(
        run(&session, "cat skill://review/SKILL.md").await.output,
        "review carefully\n"
    );

    // A big output's artifact is addressable.
    let big = run(&session, "seq 1 100000").await;
    let artifact = big.truncation.artifact.expect("artifact");
    let result = run(&session, &format!("wc -c < artifact://{}", artifact.id)).await;
    assert_eq!(result.output.trim(), big.truncation.total_bytes.to_string());

    // Escapes and unknown URLs stay as written (and so fail as bash sees them).
    let result = run(&session, "cat local://../../etc/passwd 2>&1").await;
    assert!(
        result.output.contains("local://../../etc/passwd"),
        "{}",
        result.output
    );
    let err = session
        .run(RunRequest::new("pwd").cwd("plan://nowhere"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Path \"plan://nowhere\" uses internal scheme \"plan\" and must be resolved through the proper protocol handler, not as a filesystem path."
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn async_can_be_turned_off_with_the_reference_message() {
    let mut config = Config::default();
    config.jobs.async_enabled = false;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("no-async").await;
    let err = session
        .run(RunRequest::new("sleep 1").run_async(true))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Async bash execution is disabled. Enable async.enabled to use async mode."
    );
    rt.runtime.shutdown().await;
}

fn golden(text: &str) -> String {
    // Only the volatile parts change: wall time and job ids.
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if line.starts_with("Wall time: ") {
            out.push_str(if line.ends_with('\n') {
                "Wall time: [secs] seconds\n"
            } else {
                "Wall time: [secs] seconds"
            });
        } else {
            out.push_str(line);
        }
    }
    let mut redacted = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(pos) = rest.find("job_") {
        redacted.push_str(&rest[..pos]);
        let id_len = rest[pos + 4..]
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            .count();
        redacted.push_str("job_[id]");
        rest = &rest[pos + 4 + id_len..];
    }
    redacted.push_str(rest);
    redacted
}

#[tokio::test]
async fn golden_result_texts() {
    let rt = TestRuntime::start().await;
    let session = rt.session("golden").await;
    insta::assert_snapshot!(
        "short_output",
        golden(&run(&session, "echo hello; echo world").await.text)
    );
    insta::assert_snapshot!("empty_output", golden(&run(&session, "true").await.text));
    insta::assert_snapshot!(
        "non_zero_exit",
        golden(&run(&session, "echo failing >&2; (exit 3)").await.text)
    );
    let timeout = run_request(
        &session,
        RunRequest::new("echo started; sleep 30").timeout_secs(1),
    )
    .await;
    insta::assert_snapshot!("timeout", golden(&timeout.text));
    let clamped = run_request(
        &session,
        RunRequest::new("echo clamped").timeout_secs(99_999),
    )
    .await;
    insta::assert_snapshot!("clamped_timeout", golden(&clamped.text));
    // About 2 MB: "line NNNNNNN padded to 50 bytes".
    let big = run(
        &session,
        "for ((i=1; i<=40000; i++)); do printf 'line %07d %040s\\n' $i x; done",
    )
    .await;
    assert_eq!(big.truncation.total_bytes, 40_000 * 54);
    assert!(big.text.len() <= 51_200, "{}", big.text.len());
    insta::assert_snapshot!("two_megabytes", golden(&big.text));
    tokio::time::sleep(Duration::from_millis(10)).await;
    rt.runtime.shutdown().await;
}
