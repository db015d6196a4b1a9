"""Drives `shellvisor mcp` with the official MCP Python SDK.

Usage: test_mcp.py <path to the shellvisor binary>
Each scenario has its own deadline; the script exits non-zero on the first failure.
"""

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.shared.exceptions import MCPError
from mcp.client.stdio import stdio_client

from procs import processes_with_env

BINARY = sys.argv[1]
TOOLS = {"bash", "job_output", "job_wait", "job_kill", "job_list", "write_stdin", "pty_screen", "session_close"}


# Every notification the server sent on the current connection, in order.
NOTIFICATIONS: list = []


async def collect_notifications(message) -> None:
    if not isinstance(message, Exception):
        NOTIFICATIONS.append(message)


async def resource_updated(uri: str, within: float = 20) -> None:
    """Waits for a `notifications/resources/updated` of `uri`."""
    with anyio.fail_after(within):
        while not any(getattr(n, "method", None) == "notifications/resources/updated" and n.params.uri == uri
                      for n in NOTIFICATIONS):
            await anyio.sleep(0.02)


def text(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


async def scenario_tools(session: ClientSession) -> None:
    listed = await session.list_tools()
    names = {tool.name for tool in listed.tools}
    assert names == TOOLS, names
    for tool in listed.tools:
        assert tool.input_schema["type"] == "object", tool
        assert tool.output_schema is not None, tool.name
    bash = next(tool for tool in listed.tools if tool.name == "bash")
    assert "command" in bash.input_schema["required"], bash.input_schema


async def scenario_echo_and_cwd(session: ClientSession) -> None:
    result = await session.call_tool("bash", {"command": "echo hi"})
    assert not result.is_error, text(result)
    assert text(result).startswith("hi\n"), text(result)
    data = result.structured_content
    assert data["status"] == "completed" and data["exit_code"] == 0, data
    assert data["job_id"].startswith("job_"), data

    work = tempfile.mkdtemp(prefix="shellvisor-mcp-")
    await session.call_tool("bash", {"command": f"cd {work} && export KEPT=yes"})
    result = await session.call_tool("bash", {"command": "pwd; echo $KEPT"})
    assert text(result).startswith(f"{os.path.realpath(work)}\nyes\n"), text(result)
    assert result.structured_content["cwd"] == os.path.realpath(work)

    # A named session has its own shell.
    other = await session.call_tool("bash", {"command": "pwd", "session_id": "other", "cwd": "/"})
    assert text(other).startswith("/\n"), text(other)

    failed = await session.call_tool("bash", {"command": "exit 3"})
    assert failed.is_error and failed.structured_content["exit_code"] == 3


async def scenario_timeout(session: ClientSession) -> None:
    # The server runs without auto-background: the call itself times out.
    started = time.monotonic()
    result = await session.call_tool("bash", {"command": "echo before; sleep 30", "timeout": 1})
    assert time.monotonic() - started < 15
    assert result.is_error
    data = result.structured_content
    assert data["timed_out"] and data["state"] == "timed_out", data
    assert "[Command timed out after 1 seconds]" in text(result), text(result)
    assert "before" in text(result)


async def scenario_deadline_before_the_threshold(session: ClientSession) -> None:
    # The server auto-backgrounds at 1 s. A deadline that comes first keeps the
    # run in the foreground: `echo quick` under `timeout: 1` is its result (the
    # reference's min(threshold, timeout - 1 s) would answer it with a job id),
    # and a run that outlives `timeout: 1` answers with its timeout.
    quick = await session.call_tool("bash", {"command": "echo quick", "timeout": 1})
    assert quick.structured_content["status"] == "completed", quick.structured_content
    assert text(quick).startswith("quick\n"), text(quick)
    started = time.monotonic()
    result = await session.call_tool("bash", {"command": "echo before; sleep 30", "timeout": 1})
    assert time.monotonic() - started < 15
    data = result.structured_content
    assert result.is_error and data["timed_out"] and data["state"] == "timed_out", data
    assert "before" in text(result) and "[Command timed out after 1 seconds]" in text(result), text(result)
    # A deadline after the threshold still backgrounds, and then fires in the background.
    result = await session.call_tool("bash", {"command": "sleep 30", "timeout": 3})
    data = result.structured_content
    assert data["status"] == "background", data
    waited = await session.call_tool("job_wait", {"job_id": data["job_id"], "timeout": 20})
    assert waited.is_error and waited.structured_content["timed_out"], waited.structured_content


async def scenario_auto_background(session: ClientSession) -> None:
    # The server runs with --auto-background-secs 1.
    result = await session.call_tool("bash", {"command": "sleep 2; echo done"})
    data = result.structured_content
    assert data["status"] == "background" and data["background_reason"] == "timer", data
    job_id = data["job_id"]
    # The answer tells the model how to follow the job up with this server's tools.
    assert text(result).endswith(
        f"Use job_wait (job_id {job_id}) to wait for it, job_output to read its output so far, "
        "job_kill to stop it; prefer to continue with another task in the meanwhile if it's not blocking."
    ), text(result)
    await session.call_tool("bash", {"command": "true"})
    listed = await session.call_tool("job_list", {})
    assert any(job["job_id"] == job_id for job in listed.structured_content["jobs"])
    everything = listed.structured_content["jobs"]
    assert listed.structured_content["retained"] == len(everything), listed.structured_content
    first = await session.call_tool("job_list", {"limit": 1})
    cursor = first.structured_content["next_cursor"]
    assert f"call job_list with cursor={cursor} for the rest" in text(first), text(first)
    rest = await session.call_tool("job_list", {"cursor": cursor})
    paged = first.structured_content["jobs"] + rest.structured_content["jobs"]
    assert [j["job_id"] for j in paged] == [j["job_id"] for j in everything], rest.structured_content
    waited = await session.call_tool("job_wait", {"job_id": job_id, "timeout": 20})
    assert waited.structured_content["status"] == "completed", waited.structured_content
    assert waited.structured_content["exit_code"] == 0
    assert "done" in text(waited), text(waited)
    output = await session.call_tool("job_output", {"job_id": job_id})
    assert text(output) == "done\n", text(output)
    assert output.structured_content["closed"] is True


async def scenario_job_kill_answers_its_success(session: ClientSession) -> None:
    # A kill that ended the job is the tool's success (not `isError`), with
    # the job's final state; a later wait reads the same killed result.
    started = await session.call_tool("bash", {"command": "sleep 60", "session_id": "kill-ok"})
    job_id = started.structured_content["job_id"]
    killed = await session.call_tool("job_kill", {"job_id": job_id, "session_id": "kill-ok"})
    data = killed.structured_content
    assert not killed.is_error, text(killed)
    assert data["status"] == "completed" and data["killed"] is True, data
    assert "[Command cancelled]" in text(killed), text(killed)
    waited = await session.call_tool("job_wait", {"job_id": job_id, "session_id": "kill-ok"})
    assert waited.is_error and waited.structured_content["killed"] is True, waited.structured_content


async def scenario_per_call_auto_background(session: ClientSession) -> None:
    # This server does not auto-background; the call asks for it itself.
    sid = "per-call"
    started = time.monotonic()
    result = await session.call_tool(
        "bash", {"command": "sleep 3; echo x", "auto_background_after": 1, "session_id": sid}
    )
    elapsed = time.monotonic() - started
    data = result.structured_content
    assert data["status"] == "background" and elapsed < 2.5, (elapsed, data)
    waited = await session.call_tool("job_wait", {"job_id": data["job_id"], "session_id": sid, "timeout": 20})
    assert waited.structured_content["status"] == "completed", waited.structured_content
    assert text(waited).count("x\n") == 1 and waited.structured_content["output_bytes"] == 2, text(waited)
    refused = await session.call_tool("bash", {"command": "true", "auto_background_after": -1, "session_id": sid})
    assert refused.is_error and "between 0 and 86400 seconds" in text(refused), text(refused)


async def scenario_pty(session: ClientSession) -> None:
    result = await session.call_tool(
        "bash", {"command": "read -p 'name? ' n; echo hi $n", "pty": True, "session_id": "pty"}
    )
    data = result.structured_content
    assert data["status"] == "background" and data["state"] == "awaiting_input", data
    assert "name?" in text(result), text(result)
    job_id = data["job_id"]
    screen = await session.call_tool("pty_screen", {"job_id": job_id, "session_id": "pty"})
    assert screen.structured_content["state"] == "awaiting_input", screen.structured_content
    typed = await session.call_tool(
        "write_stdin",
        {"job_id": job_id, "session_id": "pty", "text": "bob", "keys": ["Enter"], "wait_ms": 5000},
    )
    report = typed.structured_content
    assert report["state"] == "exited" and report["exit_code"] == 0, report
    assert "hi bob" in report["screen"], report


async def scenario_write_stdin_waits_for_the_reaction(session: ClientSession) -> None:
    # The program takes a second to answer: the screen returned is the one
    # after it answered, not the prompt it showed before the input.
    sid = "slow-pty"
    result = await session.call_tool(
        "bash",
        {"command": "read -p 'name? ' n; sleep 1; echo hi $n; read -p 'again? ' m", "pty": True, "session_id": sid},
    )
    job_id = result.structured_content["job_id"]
    assert result.structured_content["state"] == "awaiting_input", result.structured_content
    # A bad key among good ones is refused before anything is typed.
    huge = await session.call_tool(
        "write_stdin", {"job_id": job_id, "session_id": sid, "text": "lost", "keys": ["Enter", "M-" * 50_000]}
    )
    assert huge.is_error and "Key name too long: 100000 bytes" in text(huge), text(huge)[:300]
    assert len(text(huge)) < 400, len(text(huge))
    typed = await session.call_tool(
        "write_stdin", {"job_id": job_id, "session_id": sid, "text": "bob", "keys": ["Enter"], "wait_ms": 10000}
    )
    report = typed.structured_content
    assert report["state"] == "awaiting_input", report
    assert "hi bob" in report["screen"] and "again?" in report["screen"], report
    assert "lost" not in report["screen"], report
    await session.call_tool("job_kill", {"job_id": job_id, "session_id": sid})


async def scenario_full_screen_result(session: ClientSession) -> None:
    # An editor's result is what it showed last, not its escape-stripped frames.
    path = os.path.join(tempfile.mkdtemp(prefix="shellvisor-mcp-vim-"), "notes.txt")
    sid = "vim"
    started = await session.call_tool(
        "bash", {"command": f"vim -u NONE -N {path}; echo after-vim", "pty": True, "session_id": sid}
    )
    data = started.structured_content
    assert data["state"] == "awaiting_input", data
    typed = await session.call_tool(
        "write_stdin",
        {"job_id": data["job_id"], "session_id": sid, "text": "ihello", "keys": ["Esc"], "wait_ms": 2000},
    )
    assert typed.structured_content["state"] == "awaiting_input", typed.structured_content
    await session.call_tool(
        "write_stdin",
        {"job_id": data["job_id"], "session_id": sid, "text": ":wq", "keys": ["Enter"], "wait_ms": 5000},
    )
    done = await session.call_tool("job_wait", {"job_id": data["job_id"], "session_id": sid, "timeout": 20})
    body = text(done)
    assert done.structured_content["status"] == "completed", done.structured_content
    assert body.startswith("hello\n") and "written\nafter-vim\n" in body, repr(body)
    assert "hell:wq" not in body, body
    assert "drew on the full screen" in body, body
    with open(path) as f:
        assert f.read() == "hello\n"


async def scenario_cancel(session: ClientSession) -> None:
    marker = f"MCP_CANCEL_{uuid.uuid4().hex}"
    with anyio.move_on_after(1.5) as scope:
        await session.call_tool(
            "bash", {"command": "sleep 60; echo never", "env": {"CANCEL_MARKER": marker}, "session_id": "cancel"}
        )
    assert scope.cancelled_caught, "the call was not cancelled"
    deadline = time.monotonic() + 10
    while processes_with_env(f"CANCEL_MARKER={marker}"):
        assert time.monotonic() < deadline, processes_with_env(f"CANCEL_MARKER={marker}")
        await anyio.sleep(0.05)
    # The session still works.
    result = await session.call_tool("bash", {"command": "echo alive", "session_id": "cancel"})
    assert text(result).startswith("alive"), text(result)


async def scenario_errors(session: ClientSession) -> None:
    result = await session.call_tool("bash", {"command": "true", "env": {"1BAD": "x"}})
    assert result.is_error and text(result) == "Invalid bash env name: 1BAD", text(result)
    assert result.structured_content["error"] == "invalid_env_name"
    missing = await session.call_tool("job_wait", {"job_id": "job_nope", "timeout": 1})
    assert missing.is_error and missing.structured_content["error"] == "job_not_found"


async def scenario_progress(session: ClientSession) -> None:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    result = await session.call_tool(
        "bash",
        {"command": "for i in 1 2 3 4; do echo line$i; sleep 0.7; done"},
        progress_callback=on_progress,
    )
    assert text(result).startswith("line1\nline2\nline3\nline4\n"), text(result)
    assert seen, "no progress notifications"
    progresses = [p for p, _ in seen]
    assert progresses == sorted(set(progresses)), progresses
    assert any(message and message.startswith("line") for _, message in seen), seen


async def scenario_backgrounded_call_keeps_its_directory(session: ClientSession) -> None:
    # The server runs with --auto-background-secs 1: both calls go to the
    # background, and the session's next shell starts where they asked to be.
    work = os.path.realpath(tempfile.mkdtemp(prefix="shellvisor-mcp-bg-"))
    sid = "bg-cwd"
    for call in ({"command": "sleep 3", "cwd": work}, {"command": f"cd {work}/.. && sleep 3"}):
        result = await session.call_tool("bash", {**call, "session_id": sid})
        assert result.structured_content["status"] == "background", result.structured_content
        here = await session.call_tool("bash", {"command": "pwd", "session_id": sid})
        want = work if "cwd" in call else os.path.dirname(work)
        assert text(here).startswith(f"{want}\n"), (call, text(here))
        await session.call_tool("bash", {"command": "cd /", "session_id": sid})


async def scenario_state_that_breaks_the_shell(session: ClientSession) -> None:
    sid = "broken"
    # A builtin the wrapper needs is disabled: the next call runs in a fresh
    # shell, says so, and still sees the exported state.
    await session.call_tool("bash", {"command": "export KEPT=yes; enable -n .", "session_id": sid})
    with anyio.fail_after(20):
        result = await session.call_tool("bash", {"command": "echo after $KEPT", "session_id": sid})
    assert text(result).startswith("after yes\n"), text(result)
    assert "disabled `.`, which the runtime needs); it ran in a fresh shell" in text(result), text(result)
    # A trap set in one call prints when a later call exits the shell.
    await session.call_tool("bash", {"command": "trap 'echo bye' EXIT", "session_id": sid})
    result = await session.call_tool("bash", {"command": "echo body; exit 3", "session_id": sid})
    assert text(result).startswith("body\nbye\n"), text(result)
    assert result.structured_content["exit_code"] == 3, result.structured_content


async def scenario_request_limits(session: ClientSession) -> None:
    # Integral floats are seconds; a fraction rounds up.
    result = await session.call_tool("bash", {"command": "echo ok", "timeout": 10.0})
    assert not result.is_error and text(result).startswith("ok\n"), text(result)
    result = await session.call_tool("bash", {"command": "sleep 30", "timeout": 1.5})
    assert result.structured_content["timed_out"], result.structured_content
    assert "[Command timed out after 2 seconds]" in text(result), text(result)
    # A request over 16 MiB is answered (an error with the limit), not dropped.
    with anyio.fail_after(60):
        try:
            result = await session.call_tool("bash", {"command": "echo " + "x" * (17 * 1024 * 1024)})
        except MCPError as err:
            assert "request too large" in str(err) and "16777216" in str(err), str(err)
        else:
            raise AssertionError(f"an oversized request was run: {text(result)[:200]}")
    # The connection still works.
    result = await session.call_tool("bash", {"command": "echo still"})
    assert text(result).startswith("still\n"), text(result)


async def scenario_results_tell_the_truth(session: ClientSession) -> None:
    sid = "truth"
    work = os.path.realpath(tempfile.mkdtemp(prefix="shellvisor-mcp-gone-"))
    await session.call_tool("bash", {"command": f"cd {work}", "session_id": sid})
    # The shell exits: the result still says where it ran.
    exited = await session.call_tool("bash", {"command": f"rm -rf {work}; exit 0", "session_id": sid})
    assert exited.structured_content["cwd"] == work, exited.structured_content
    # Its directory is gone: the next shell starts elsewhere, and says so.
    moved = await session.call_tool("bash", {"command": "pwd", "session_id": sid})
    assert f"The session's working directory {work} no longer exists" in text(moved), text(moved)
    assert moved.structured_content["cwd"] == text(moved).split("\n")[0], moved.structured_content
    # A line cut at the column cap is truncation, with a pointer to the whole.
    long = await session.call_tool("bash", {"command": "printf 'x%.0s' {1..5000}; echo", "session_id": sid})
    data = long.structured_content
    assert data["truncated"] and data["output_bytes"] == 5001, data
    assert "[1 long line cut short (…). Read artifact://" in text(long), text(long)
    assert data["artifact_path"] and os.path.getsize(data["artifact_path"]) == 5001, data


async def scenario_background_answers_count_their_output(session: ClientSession) -> None:
    # The server runs with --auto-background-secs 1.
    work = os.path.realpath(tempfile.mkdtemp(prefix="shellvisor-mcp-bgout-"))
    result = await session.call_tool("bash", {"command": "echo hi; sleep 2", "cwd": work, "session_id": "bgout"})
    data = result.structured_content
    assert data["status"] == "background" and "hi" in text(result), (data, text(result))
    assert data["output_bytes"] == 3 and data["cwd"] == work, data
    await session.call_tool("job_wait", {"job_id": data["job_id"], "session_id": "bgout", "timeout": 20})


async def scenario_session_close(session: ClientSession) -> None:
    marker = f"MCP_CLOSE_{uuid.uuid4().hex}"
    sid = "closeme"
    await session.call_tool(
        "bash", {"command": "export STATE=set; sleep 300 &", "env": {"CLOSE_MARKER": marker}, "session_id": sid}
    )
    assert processes_with_env(f"CLOSE_MARKER={marker}"), "the server did not start"
    closed = await session.call_tool("session_close", {"session_id": sid})
    assert not closed.is_error and closed.structured_content["session_id"] == sid, closed.structured_content
    assert not processes_with_env(f"CLOSE_MARKER={marker}"), "closing left the session's processes"
    fresh = await session.call_tool("bash", {"command": "echo state=$STATE", "session_id": sid})
    assert text(fresh).startswith("state=\n"), text(fresh)


async def scenario_idle_sessions_close(session: ClientSession) -> None:
    # The server runs with --idle-close-secs 2.
    idle = await session.call_tool("bash", {"command": "export X=1; echo $$", "session_id": "idle"})
    idle_bash = int(text(idle).split()[0])
    busy = await session.call_tool("bash", {"command": "sleep 300 & echo $$", "session_id": "busy"})
    busy_bash = int(text(busy).split()[0])
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{idle_bash}"):
        assert time.monotonic() < deadline, "the idle session was never closed"
        await anyio.sleep(0.1)
    # The session holding a `server &` is in use: three limits later it lives.
    await anyio.sleep(6)
    assert os.path.exists(f"/proc/{busy_bash}"), "a session with a server left running was closed"
    again = await session.call_tool("bash", {"command": "echo x=$X", "session_id": "idle"})
    assert text(again).startswith("x=\n"), text(again)
    await session.call_tool("session_close", {"session_id": "busy"})


async def scenario_artifacts_live_on_disk_and_go_with_their_job(session: ClientSession) -> None:
    # A 5 MB output's artifact is on a disk (not tmpfs), and it is deleted
    # when its job is evicted (64 finished jobs retained per session).
    sid = "artifacts"
    result = await session.call_tool(
        "bash", {"command": "head -c 5000000 /dev/zero | tr '\\0' x; echo", "session_id": sid}
    )
    path = result.structured_content["artifact_path"]
    assert path and os.path.getsize(path) == 5_000_001, result.structured_content
    kind = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True).stdout.strip()
    assert kind not in ("tmpfs", "ramfs"), f"{path} is on {kind}"
    for _ in range(64):
        await session.call_tool("bash", {"command": "true", "session_id": sid})
    deadline = time.monotonic() + 10
    while os.path.exists(path):
        assert time.monotonic() < deadline, f"the evicted job's artifact {path} stayed"
        await anyio.sleep(0.05)


async def scenario_ready_and_idle(session: ClientSession) -> None:
    # `wait_for` output: "start the dev server, tell me when it listens".
    sid = "ready"
    started = time.monotonic()
    result = await session.call_tool("bash", {
        "command": "python3 -u -m http.server 0 --bind 127.0.0.1", "wait_for": {"output": "Serving HTTP"},
        "session_id": sid})
    took = time.monotonic() - started
    data = result.structured_content
    assert took < 2, took
    assert not result.is_error and data["status"] == "background" and data["background_reason"] == "ready", data
    assert "Ready: output matching `Serving HTTP`." in text(result), text(result)
    port = int(text(result).split("port ")[1].split()[0])
    fetched = await session.call_tool("bash", {
        "command": f"python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:{port}/\").status)'",
        "session_id": sid})
    assert text(fetched).startswith("200\n"), text(fetched)
    # `idle_timeout`: silence ends the run as a timeout with its own notice.
    started = time.monotonic()
    idle = await session.call_tool("bash", {"command": "echo a; sleep 5; echo b", "idle_timeout": 1, "session_id": sid})
    took = time.monotonic() - started
    assert 0.9 < took < 3, took
    data = idle.structured_content
    assert idle.is_error and data["timed_out"] and data["timeout_reason"] == "idle", data
    assert text(idle).startswith("[Command produced no output for 1 seconds]\na\n"), text(idle)
    # job_wait over several jobs: the first to finish, else each one's news.
    slow = await session.call_tool("bash", {"command": "echo slow-start; sleep 30", "async": True, "session_id": sid})
    quick = await session.call_tool("bash", {"command": "sleep 0.5; echo quick", "async": True, "session_id": sid})
    ids = [slow.structured_content["job_id"], quick.structured_content["job_id"]]
    waited = await session.call_tool("job_wait", {"job_ids": ids, "timeout": 20, "session_id": sid})
    assert waited.structured_content["job_id"] == ids[1] and text(waited).startswith("quick\n"), text(waited)
    server_id = data_id = result.structured_content["job_id"]
    pending = await session.call_tool("job_wait", {"job_ids": [ids[0], server_id], "timeout": 1, "session_id": sid})
    jobs = {job["job_id"]: job for job in pending.structured_content["jobs"]}
    assert not pending.is_error and pending.structured_content["status"] == "running", pending.structured_content
    assert jobs[ids[0]]["new_output"] == "slow-start\n" and jobs[ids[0]]["state"] == "running", jobs
    again = await session.call_tool("job_wait", {"job_ids": [ids[0], data_id], "timeout": 1, "session_id": sid})
    assert again.structured_content["jobs"][0]["new_output"] == "", "output shown twice"
    # `limits`: a program allocating 256 MiB under 64 MiB is killed, and says so.
    limited = await session.call_tool("bash", {
        "command": "python3 -c 'b = bytearray(256 * 1024 * 1024); print(\"allocated\")'",
        "limits": {"memory_mb": 64}, "session_id": sid})
    assert limited.is_error and "[Killed: memory limit 64 MiB reached]" in text(limited), text(limited)
    assert limited.structured_content["limits"]["reached"] == ["memory_mb"], limited.structured_content
    bad = await session.call_tool("bash", {"command": "true", "limits": {"memory_mb": 0}, "session_id": sid})
    assert bad.is_error and "limits.memory_mb must be between 1 and 1048576" in text(bad), text(bad)
    bad = await session.call_tool("bash", {"command": "true", "wait_for": {"output": "("}, "session_id": sid})
    assert bad.is_error and bad.structured_content["error"] == "invalid_request", bad.structured_content
    bad = await session.call_tool("bash", {"command": "true", "idle_timeout": -1, "session_id": sid})
    assert bad.is_error and "between 0 and 86400 seconds" in text(bad), text(bad)
    await session.call_tool("session_close", {"session_id": sid})


async def scenario_artifacts_and_jobs_are_resources(session: ClientSession) -> None:
    # A 5 MiB binary output: the result links its artifact, and resources/read
    # returns its exact bytes (a blob, since they are not UTF-8), whole or by range.
    sid = "resources"
    expected = bytes(range(256)) * 20480
    result = await session.call_tool("bash", {
        "command": "python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 20480)'", "session_id": sid})
    links = [block for block in result.content if block.type == "resource_link"]
    job_id = result.structured_content["job_id"]
    assert len(links) == 1 and str(links[0].uri) == f"artifact://{job_id}", result.content
    assert links[0].size == len(expected), links[0]
    read = await session.read_resource(f"artifact://{job_id}")
    assert base64.b64decode(read.contents[0].blob) == expected, "the artifact's bytes differ"
    part = await session.read_resource(f"artifact://{job_id}?offset=1000&length=10")
    assert base64.b64decode(part.contents[0].blob) == expected[1000:1010]
    # Text output reads as text.
    lines = await session.call_tool("bash", {"command": "seq 1 200000", "session_id": sid})
    link = next(block for block in lines.content if block.type == "resource_link")
    whole = await session.read_resource(str(link.uri))
    assert whole.contents[0].text == "".join(f"{i}\n" for i in range(1, 200001))
    # A job is a resource; a subscription hears when it ends.
    started = await session.call_tool("bash", {"command": "sleep 1; echo finished", "async": True, "session_id": sid})
    uri = f"job://{sid}/{started.structured_content['job_id']}"
    listed = await session.list_resources()
    assert uri in {str(resource.uri) for resource in listed.resources}, listed
    # Past a page (100 jobs), the list goes on by cursor, across sessions, each job once
    # (64 finished jobs are retained per session: two sessions fill more than a page).
    others = [f"{sid}:pages-{n}" for n in range(2)]
    for other in others:
        for _ in range(70):
            await session.call_tool("bash", {"command": "true", "session_id": other})
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_resources(params=params)
        pages += 1
        assert len(page.resources) <= 100, len(page.resources)
        seen.extend(str(resource.uri) for resource in page.resources)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages >= 2 and len(seen) == len(set(seen)), (pages, len(seen))
    assert uri in seen, seen
    for other in others:
        listed = await session.call_tool("job_list", {"session_id": other, "limit": 1000})
        expected = [f"job://{other}/{job['job_id']}" for job in listed.structured_content["jobs"]]
        assert len(expected) == 64 and [u for u in seen if u.startswith(f"job://{other}/")] == expected, seen
    await session.subscribe_resource(uri)
    await resource_updated(uri)
    state = json.loads((await session.read_resource(uri)).contents[0].text)
    assert state["state"] == "completed" and state["output_tail"] == "finished\n", state
    # A job that ended before the subscription is told at once.
    ended = f"job://{sid}/{lines.structured_content['job_id']}"
    await session.subscribe_resource(ended)
    await resource_updated(ended, within=5)
    # Unknown resources are refused clearly.
    for bad in ["artifact://job_nope", "job://nope", "file:///etc/passwd"]:
        try:
            await session.read_resource(bad)
            raise AssertionError(f"{bad} was read")
        except MCPError as err:
            assert err.error.code == -32002, (bad, err.error)
    await session.call_tool("session_close", {"session_id": sid})


AUTO_BACKGROUND_SCENARIOS = [
    scenario_tools,
    scenario_echo_and_cwd,
    scenario_auto_background,
    scenario_job_kill_answers_its_success,
    scenario_deadline_before_the_threshold,
    scenario_pty,
    scenario_write_stdin_waits_for_the_reaction,
    scenario_full_screen_result,
    scenario_errors,
    scenario_backgrounded_call_keeps_its_directory,
    scenario_background_answers_count_their_output,
]
async def scenario_the_minimizer_is_on(session: ClientSession) -> None:
    """`shellvisor mcp` minimizes by default: a run of identical lines is
    shown once, the raw bytes stay in the artifact; a pipe is never touched."""
    result = await session.call_tool("bash", {"command": "printf 'same\\n%.0s' $(seq 1 12)"})
    shown = text(result)
    assert shown.startswith("same\n[the line above repeated 11 more times]\n"), shown
    artifact = f"artifact://{result.structured_content['job_id']}"
    assert shown.rstrip().endswith(f"[raw output: {artifact}]"), (shown, artifact)
    with open(result.structured_content["artifact_path"]) as raw:
        assert raw.read() == "same\n" * 12
    piped = await session.call_tool("bash", {"command": "printf 'same\\n%.0s' $(seq 1 12) | cat"})
    assert text(piped).startswith("same\n" * 12), text(piped)


FOREGROUND_SCENARIOS = [
    scenario_the_minimizer_is_on,
    scenario_progress,
    scenario_per_call_auto_background,
    scenario_ready_and_idle,
    scenario_artifacts_and_jobs_are_resources,
    scenario_timeout,
    scenario_cancel,
    scenario_state_that_breaks_the_shell,
    scenario_request_limits,
    scenario_results_tell_the_truth,
    scenario_session_close,
    scenario_artifacts_live_on_disk_and_go_with_their_job,
]
IDLE_SCENARIOS = [scenario_idle_sessions_close]


async def tasks_with_a_raw_client() -> None:
    """The tasks extension (SEP-2663, as rmcp implements it; the Python SDK
    has no client for it yet), driven with plain JSON lines: a client that
    declares it gets a task for a `bash` call that goes to the background,
    polls it to its result with tasks/get, and cancels another with
    tasks/cancel. The task is the job: job_wait and job:// name the same."""
    marker = f"SHELLVISOR_MCP_TEST_{uuid.uuid4().hex}"
    process = await anyio.open_process(
        [BINARY, "mcp", "--auto-background-secs", "1"],
        env={**os.environ, "MCP_SERVER_MARKER": marker, "SHELLVISOR_LOG": "error"},
        cwd=tempfile.gettempdir(),
    )
    buffered = b""
    next_id = 0

    async def call(method: str, params: dict) -> dict:
        nonlocal buffered, next_id
        next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params})
        await process.stdin.send(line.encode() + b"\n")
        while True:
            while b"\n" not in buffered:
                buffered += await process.stdout.receive()
            raw, buffered = buffered.split(b"\n", 1)
            message = json.loads(raw)
            if message.get("id") == next_id:
                assert "error" not in message, message
                return message["result"]

    async def until_terminal(task_id: str) -> dict:
        with anyio.fail_after(20):
            while True:
                task = await call("tasks/get", {"taskId": task_id})
                if task["status"] != "working":
                    return task
                await anyio.sleep(task["pollIntervalMs"] / 1000)

    with anyio.fail_after(60):
        init = await call("initialize", {
            "protocolVersion": "2025-11-25", "clientInfo": {"name": "raw", "version": "1"},
            "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
        assert "io.modelcontextprotocol/tasks" in init["capabilities"]["extensions"], init
        await process.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        quick = await call("tools/call", {"name": "bash", "arguments": {"command": "echo quick"}})
        assert quick.get("resultType") != "task" and quick["content"][0]["text"].startswith("quick\n"), quick
        created = await call("tools/call", {"name": "bash", "arguments": {"command": "sleep 2; echo done"}})
        assert created["resultType"] == "task" and created["status"] == "working", created
        task_id = created["taskId"]
        assert task_id.startswith("job://"), task_id
        done = await until_terminal(task_id)
        assert done["status"] == "completed", done
        assert done["result"]["content"][0]["text"].startswith("done\n"), done["result"]
        assert done["result"]["structuredContent"]["exit_code"] == 0, done["result"]
        assert done["createdAt"] == created["createdAt"], (done, created)
        job_id = done["result"]["structuredContent"]["job_id"]
        waited = await call("tools/call", {"name": "job_wait", "arguments": {"job_id": job_id}})
        assert waited["structuredContent"]["status"] == "completed", waited
        long = await call("tools/call", {"name": "bash", "arguments": {"command": "sleep 60", "async": True}})
        assert long["resultType"] == "task", long
        await call("tasks/cancel", {"taskId": long["taskId"]})
        cancelled = await until_terminal(long["taskId"])
        assert cancelled["status"] == "cancelled", cancelled
        try:
            await call("tasks/get", {"taskId": "nope"})
            raise AssertionError("an unknown task was found")
        except AssertionError as err:
            assert "-32602" in str(err), err
    await process.stdin.aclose()
    with anyio.fail_after(20):
        await process.wait()
    deadline = time.monotonic() + 10
    while processes_with_env(f"MCP_SERVER_MARKER={marker}"):
        assert time.monotonic() < deadline, processes_with_env(f"MCP_SERVER_MARKER={marker}")
        await anyio.sleep(0.05)
    print("ok   tasks with a raw client (task, tasks/get to its result, tasks/cancel)", flush=True)


async def run_scenarios(session: ClientSession, scenarios, label: str = "") -> None:
    """Runs each scenario on `session` with its own deadline, printing its time."""
    for scenario in scenarios:
        started = time.monotonic()
        with anyio.fail_after(60):
            await scenario(session)
        print(f"ok   {label}{scenario.__name__} ({time.monotonic() - started:.2f} s)", flush=True)


async def serve_and_run(server_args: list[str], scenarios) -> None:
    marker = f"SHELLVISOR_MCP_TEST_{uuid.uuid4().hex}"
    params = StdioServerParameters(
        command=BINARY,
        args=["mcp", *server_args],
        env={"MCP_SERVER_MARKER": marker},
        cwd=tempfile.gettempdir(),
    )
    async with stdio_client(params) as (read, write):
        NOTIFICATIONS.clear()
        async with ClientSession(read, write, message_handler=collect_notifications) as session:
            with anyio.fail_after(30):
                await session.initialize()
            await run_scenarios(session, scenarios)
    # Closing stdin shuts the server down with everything it started.
    deadline = time.monotonic() + 10
    while processes_with_env(f"MCP_SERVER_MARKER={marker}"):
        assert time.monotonic() < deadline, processes_with_env(f"MCP_SERVER_MARKER={marker}")
        await anyio.sleep(0.05)
    print(f"ok   nothing left after the connection closed ({' '.join(server_args)})", flush=True)


async def main() -> None:
    await serve_and_run(["--auto-background-secs", "1"], AUTO_BACKGROUND_SCENARIOS)
    await serve_and_run(["--no-auto-background"], FOREGROUND_SCENARIOS)
    await serve_and_run(["--idle-close-secs", "2"], IDLE_SCENARIOS)
    await tasks_with_a_raw_client()


if __name__ == "__main__":
    anyio.run(main)
