//! The client-terminal backend through ACP: a runtime whose runs go to the
//! editor's terminals, against a real ACP client built with the
//! `agent-client-protocol` crate (its terminals run real processes), over
//! the crate's own connection between the two sides.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use agent_client_protocol::Agent;
use agent_client_protocol::Client;
use agent_client_protocol::v1::schema::CreateTerminalRequest;
use agent_client_protocol::v1::schema::CreateTerminalResponse;
use agent_client_protocol::v1::schema::KillTerminalRequest;
use agent_client_protocol::v1::schema::KillTerminalResponse;
use agent_client_protocol::v1::schema::ReleaseTerminalRequest;
use agent_client_protocol::v1::schema::ReleaseTerminalResponse;
use agent_client_protocol::v1::schema::TerminalExitStatus;
use agent_client_protocol::v1::schema::TerminalOutputRequest;
use agent_client_protocol::v1::schema::TerminalOutputResponse;
use agent_client_protocol::v1::schema::WaitForTerminalExitRequest;
use agent_client_protocol::v1::schema::WaitForTerminalExitResponse;
use shellvisor::Config;
use shellvisor::RunRequest;
use shellvisor::Runtime;
use shellvisor::acp::AcpTerminals;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

/// One terminal of the editor: its output so far and its exit once known.
struct Terminal {
    output: Arc<Mutex<Vec<u8>>>,
    exit: watch::Receiver<Option<TerminalExitStatus>>,
    pid: Option<u32>,
    request: CreateTerminalRequest,
}

/// What the editor saw.
#[derive(Default)]
struct Editor {
    terminals: HashMap<String, Terminal>,
    created: usize,
    killed: Vec<String>,
    released: Vec<String>,
}

fn exit_status(status: std::process::ExitStatus) -> TerminalExitStatus {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => TerminalExitStatus::new().exit_code(u32::try_from(code).unwrap()),
        (None, Some(signal)) => TerminalExitStatus::new().signal(format!("signal {signal}")),
        (None, None) => TerminalExitStatus::new(),
    }
}

/// Starts the terminal's command: stdout and stderr into one buffer.
fn start(request: &CreateTerminalRequest) -> Terminal {
    let mut command = tokio::process::Command::new(&request.command);
    command
        .args(&request.args)
        .envs(
            request
                .env
                .iter()
                .map(|var| (var.name.clone(), var.value.clone())),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = &request.cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().unwrap();
    let output = Arc::new(Mutex::new(Vec::new()));
    for stream in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
    ]
    .into_iter()
    .flatten()
    {
        let output = Arc::clone(&output);
        tokio::spawn(async move {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stream.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                output.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
    }
    let (exit_tx, exit) = watch::channel(None);
    let pid = child.id();
    tokio::spawn(async move {
        if let Ok(status) = child.wait().await {
            let _ = exit_tx.send(Some(exit_status(status)));
        }
    });
    Terminal {
        output,
        exit,
        pid,
        request: request.clone(),
    }
}

fn kill(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|pid| rustix::process::Pid::from_raw(i32::try_from(pid).ok()?))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Runs `scenario` with a runtime whose client terminals are the editor's,
/// over an ACP connection from the agent (the runtime's side) to the editor.
async fn with_editor<F>(config: Config, scenario: F) -> Arc<Mutex<Editor>>
where
    F: AsyncFnOnce(Runtime) + Send + 'static,
{
    let editor = Arc::new(Mutex::new(Editor::default()));
    let state = Arc::clone(&editor);
    let created = Arc::clone(&editor);
    let read = Arc::clone(&editor);
    let waited = Arc::clone(&editor);
    let killed = Arc::clone(&editor);
    let released = Arc::clone(&editor);
    let client = Client
        .v1()
        .name("test-editor")
        .on_receive_request(
            async move |request: CreateTerminalRequest, responder, _cx| {
                let mut editor = created.lock().unwrap();
                editor.created += 1;
                let id = format!("term-{}", editor.created);
                editor.terminals.insert(id.clone(), start(&request));
                responder.respond(CreateTerminalResponse::new(id))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: TerminalOutputRequest, responder, _cx| {
                let editor = read.lock().unwrap();
                let terminal = &editor.terminals[&request.terminal_id.to_string()];
                let text = String::from_utf8_lossy(&terminal.output.lock().unwrap()).into_owned();
                let exit = terminal.exit.borrow().clone();
                responder.respond(TerminalOutputResponse::new(text, false).exit_status(exit))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WaitForTerminalExitRequest, responder, cx| {
                let mut exit = waited.lock().unwrap().terminals[&request.terminal_id.to_string()]
                    .exit
                    .clone();
                // Not in the dispatch loop: other requests (a kill) go on.
                cx.spawn(async move {
                    let status = exit
                        .wait_for(Option::is_some)
                        .await
                        .map(|status| status.clone().unwrap_or_else(TerminalExitStatus::new))
                        .unwrap_or_else(|_| TerminalExitStatus::new());
                    responder.respond(WaitForTerminalExitResponse::new(status))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: KillTerminalRequest, responder, _cx| {
                let mut editor = killed.lock().unwrap();
                let id = request.terminal_id.to_string();
                kill(editor.terminals[&id].pid);
                editor.killed.push(id);
                responder.respond(KillTerminalResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReleaseTerminalRequest, responder, _cx| {
                let mut editor = released.lock().unwrap();
                let id = request.terminal_id.to_string();
                kill(editor.terminals[&id].pid);
                editor.released.push(id);
                responder.respond(ReleaseTerminalResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        );
    let done = Agent
        .v1()
        .name("shellvisor-agent")
        .connect_with(client, async move |cx| {
            let runtime = Runtime::builder(config)
                .client_terminals(AcpTerminals::new(cx, "acp-session"))
                .start()
                .await
                .map_err(agent_client_protocol::Error::into_internal_error)?;
            scenario(runtime).await;
            Ok(())
        });
    tokio::time::timeout(Duration::from_secs(120), done)
        .await
        .expect("the scenario finished in time")
        .expect("the connection worked");
    state
}

#[tokio::test]
async fn a_run_in_the_editors_terminal_returns_output_exit_code_and_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    let mut config = Config::default();
    config.shell.cwd = Some(cwd.clone());
    let editor = with_editor(config, async move |runtime: Runtime| {
        let session = runtime.session("acp").await.unwrap();
        let result = session
            .run(
                RunRequest::new("echo out; echo err >&2; pwd; echo \"$PAGER $CALL\"; exit 3")
                    .env("CALL", "yes"),
            )
            .await
            .unwrap()
            .completed()
            .unwrap();
        assert_eq!(result.exit_code, Some(3), "{}", result.text);
        assert!(
            result.output.contains("out\n") && result.output.contains("err\n"),
            "{}",
            result.output
        );
        assert!(
            result.output.contains(&format!("{}\n", cwd.display())),
            "{}",
            result.output
        );
        assert!(
            result.output.contains("cat yes\n"),
            "the guard keys and the call's env: {}",
            result.output
        );
        assert!(result.is_error && !result.timed_out);

        // A signal exit reads 137.
        let killed = session
            .run(RunRequest::new("kill -9 $$"))
            .await
            .unwrap()
            .completed()
            .unwrap();
        assert_eq!(killed.exit_code, Some(137), "{}", killed.text);

        // A timeout kills before reading, and says so.
        let timed_out = session
            .run(RunRequest::new("echo started; sleep 30").timeout_secs(1))
            .await
            .unwrap()
            .completed()
            .unwrap();
        assert!(timed_out.timed_out, "{}", timed_out.text);
        assert_eq!(timed_out.exit_code, None);
        assert!(
            timed_out
                .text
                .starts_with("[Command timed out after 1 seconds]"),
            "{}",
            timed_out.text
        );
        assert!(timed_out.output.contains("started"), "{}", timed_out.output);
        runtime.shutdown().await;
    })
    .await;
    let editor = editor.lock().unwrap();
    assert_eq!(editor.created, 3);
    assert_eq!(
        editor.killed,
        ["term-3"],
        "only the timed-out terminal was killed"
    );
    let mut released = editor.released.clone();
    released.sort();
    assert_eq!(
        released,
        ["term-1", "term-2", "term-3"],
        "every terminal is released"
    );
    let first = &editor.terminals["term-1"].request;
    assert_eq!(first.command, "bash");
    assert_eq!(first.args[0], "-c");
    assert_eq!(first.output_byte_limit, Some(51_200));
    assert!(first.cwd.as_ref().is_some_and(|cwd| cwd.is_absolute()));
}
