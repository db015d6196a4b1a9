//! Nothing the runtime starts outlives it.

use std::time::Duration;

use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

#[tokio::test]
async fn shutdown_leaves_no_process_behind() {
    let rt = TestRuntime::start().await;
    for name in ["h1", "h2", "h3"] {
        let session = rt.session(name).await;
        run(
            &session,
            "sleep 1000 & sleep 1000 & (sleep 1000; echo x) & echo started",
        )
        .await;
    }
    // A run still going when shutdown starts.
    let busy = rt.session("busy").await;
    let pending = tokio::spawn(async move {
        busy.run(RunRequest::new("sleep 1000").timeout_secs(0))
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rt.live_processes().len() >= 10, "{:?}", rt.live_processes());
    rt.runtime.shutdown().await;
    rt.assert_no_processes_within(Duration::from_secs(3)).await;
    assert_eq!(rt.runtime.live_process_groups(), 0);
    // The pending call got an answer, not a hang.
    let answered = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .unwrap()
        .unwrap();
    assert!(answered.is_err() || answered.unwrap().completed().unwrap().shell_restarted);
}

#[tokio::test]
async fn dropping_the_runtime_kills_everything() {
    let rt = TestRuntime::start().await;
    let session = rt.session("drop").await;
    run(&session, "sleep 1000 & echo started").await;
    let marker = rt.marker.clone();
    drop(session);
    drop(rt);
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        let live = crate::support::processes_with_marker(&marker);
        if live.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{live:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn closing_a_session_kills_its_processes_only() {
    let rt = TestRuntime::start().await;
    let closing = rt.session("closing").await;
    let staying = rt.session("staying").await;
    run(&closing, "sleep 1001 & echo started").await;
    run(&staying, "sleep 1002 & echo started").await;
    // `echo started` can answer before the `&` child has exec'd `sleep`
    // (until then it is a second `bash` in the list): wait for both sleeps.
    rt.wait_for_processes(Duration::from_secs(10), "sleeps not started", |live| {
        ["sleep 1001", "sleep 1002"]
            .iter()
            .all(|sleep| live.iter().any(|(_, cmd)| cmd.contains(sleep)))
    })
    .await;
    rt.runtime.close_session("closing").await;
    let live = rt.live_processes();
    assert!(
        live.iter().all(|(_, cmd)| !cmd.contains("sleep 1001")),
        "{live:?}"
    );
    assert!(
        live.iter().any(|(_, cmd)| cmd.contains("sleep 1002")),
        "{live:?}"
    );
    assert_eq!(run(&staying, "echo fine").await.output, "fine\n");
    let reopened = rt.session("closing").await;
    assert_eq!(
        run_request(&reopened, RunRequest::new("echo fresh"))
            .await
            .output,
        "fresh\n"
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
#[allow(unsafe_code)]
async fn descriptors_of_the_host_process_never_reach_a_shell() {
    use std::os::fd::AsRawFd;
    let (leaky, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
    // Simulate an embedding program that left a descriptor inheritable.
    // SAFETY: fcntl on a descriptor this test owns; it only clears FD_CLOEXEC.
    let cleared = unsafe { libc::fcntl(leaky.as_raw_fd(), libc::F_SETFD, 0) };
    assert_eq!(cleared, 0);
    let target = std::fs::read_link(format!("/proc/self/fd/{}", leaky.as_raw_fd())).unwrap();
    let target = target.to_string_lossy().into_owned();
    assert!(target.starts_with("socket:"), "{target}");

    let rt = TestRuntime::start().await;
    let session = rt.session("fds").await;
    let result = run(
        &session,
        "for f in /proc/$$/fd/* /proc/self/fd/*; do readlink \"$f\"; done",
    )
    .await;
    assert!(
        !result.output.contains(&target),
        "leaked into the shell:\n{}",
        result.output
    );
    assert!(result.output.contains("pipe:"), "{}", result.output);
    rt.runtime.shutdown().await;
}
