//! The output minimizer through the runtime: a single simple command's text
//! is filtered, its raw output stays byte-exact in the artifact, and pipes,
//! compound commands and oversized output pass through raw.

use shellvisor::Config;
use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

fn minimizing(max_capture_bytes: usize) -> Config {
    let mut config = Config::default();
    config.output.minimizer.enabled = true;
    config.output.minimizer.max_capture_bytes = max_capture_bytes;
    config
}

/// A crate that fails to build with two errors in two places.
fn broken_crate() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"broken\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/main.rs"),
        "fn main() {\n    let x: u32 = \"text\";\n    undefined_function();\n}\n",
    )
    .unwrap();
    dir
}

#[tokio::test]
async fn a_failing_cargo_build_keeps_every_error_and_its_location_and_the_raw_bytes() {
    let rt = TestRuntime::with_config(minimizing(4 * 1024 * 1024)).await;
    let session = rt.session("cargo").await;
    let krate = broken_crate();
    let target = tempfile::tempdir().unwrap();
    let command = format!(
        "cd '{}' && CARGO_TARGET_DIR='{}' cargo build --offline --color never",
        krate.path().display(),
        target.path().display()
    );
    let result = run(&session, &command).await;
    assert_eq!(result.exit_code, Some(101), "{}", result.text);
    let raw = session
        .read_output(&result.job_id, 0, 1 << 20)
        .await
        .unwrap();
    let raw = String::from_utf8(raw.data.to_vec()).unwrap();
    assert!(raw.contains("Compiling broken v0.1.0"), "{raw}");
    // Every error line and every location of the raw output is shown.
    for line in raw.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("error") || trimmed.starts_with("-->") {
            assert!(
                result.output.contains(line),
                "{line:?} missing from {}",
                result.output
            );
        }
    }
    assert!(result.output.contains("error[E0308]"), "{}", result.output);
    assert!(result.output.contains("error[E0425]"), "{}", result.output);
    assert!(!result.output.contains("Compiling"), "{}", result.output);
    assert_eq!(result.truncation.minimizer.as_deref(), Some("cargo"));
    // The artifact is the raw output, byte for byte.
    let artifact = result
        .truncation
        .artifact
        .clone()
        .expect("the raw bytes were saved");
    assert_eq!(std::fs::read_to_string(&artifact.path).unwrap(), raw);
    assert!(
        result
            .text
            .ends_with(&format!("[raw output: artifact://{}]", artifact.id)),
        "{}",
        result.text
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn pipes_compound_commands_and_oversized_output_pass_through_raw() {
    let rt = TestRuntime::with_config(minimizing(64 * 1024)).await;
    let session = rt.session("raw").await;
    let repo = tempfile::tempdir().unwrap();
    let init = format!(
        "cd '{}' && git init -q && git config user.email t@t && git config user.name t && touch a",
        repo.path().display()
    );
    run(&session, &init).await;

    // Alone, `git status` loses its hints...
    let alone = run(&session, "git status").await;
    assert_eq!(
        alone.truncation.minimizer.as_deref(),
        Some("git"),
        "{}",
        alone.text
    );
    assert!(
        !alone.output.contains("(use \"git add <file>"),
        "{}",
        alone.output
    );
    assert!(
        alone.output.contains("Untracked files:"),
        "{}",
        alone.output
    );
    // ...in a pipe, or a list, it is shown as it came.
    for command in ["git status | cat", "git status; true", "true && git status"] {
        let piped = run(&session, command).await;
        assert_eq!(piped.truncation.minimizer, None, "{command}");
        assert!(
            piped.output.contains("(use \"git add <file>"),
            "{command}: {}",
            piped.output
        );
    }
    // The generic rules apply to any program: a run of identical lines.
    let repeated = run(&session, "seq 1 40 | sed 's/.*/same/'").await;
    assert_eq!(repeated.truncation.minimizer, None, "a pipe");
    let repeated = run(&session, "printf 'same\\n%.0s' $(seq 1 40)").await;
    assert_eq!(repeated.truncation.minimizer.as_deref(), Some("generic"));
    assert_eq!(
        repeated.output,
        "same\n[the line above repeated 39 more times]\n"
    );
    // Over the capture cap: raw.
    let big = run_request(
        &session,
        RunRequest::new("printf 'same\\n%.0s' $(seq 1 20000)"),
    )
    .await;
    assert_eq!(big.truncation.total_bytes, 100_000);
    assert_eq!(big.truncation.minimizer, None);
    // Nothing to filter: no note.
    let plain = run(&session, "echo hello").await;
    assert_eq!(plain.truncation.minimizer, None);
    assert!(!plain.text.contains("raw output"), "{}", plain.text);
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn the_minimizer_is_off_in_the_library_by_default() {
    let rt = TestRuntime::start().await;
    let session = rt.session("off").await;
    let result = run(&session, "printf 'same\\n%.0s' $(seq 1 10)").await;
    assert_eq!(result.truncation.minimizer, None);
    assert_eq!(result.output, "same\n".repeat(10));
    rt.runtime.shutdown().await;
}
