"""Drives `shellvisor mcp --http` with the official MCP Python SDK's
streamable HTTP client, and checks what the transport refuses.

Usage: test_mcp_http.py <path to the shellvisor binary>
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import test_mcp
from procs import processes_with_env

BINARY = sys.argv[1]
TOKEN = uuid.uuid4().hex
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}'
)
SCENARIOS = [
    test_mcp.scenario_tools,
    test_mcp.scenario_echo_and_cwd,
    test_mcp.scenario_auto_background,
    test_mcp.scenario_job_kill_answers_its_success,
    test_mcp.scenario_pty,
    test_mcp.scenario_write_stdin_waits_for_the_reaction,
    test_mcp.scenario_errors,
    test_mcp.scenario_artifacts_and_jobs_are_resources,
]


def start(marker: str, *extra: str) -> tuple[subprocess.Popen, str]:
    """Starts the server on a free loopback port; returns it and its URL."""
    process = subprocess.Popen(
        [BINARY, "mcp", "--http", "0", "--auto-background-secs", "1", *extra],
        env={**os.environ, "MCP_SERVER_MARKER": marker, "SHELLVISOR_MCP_TOKEN": TOKEN, "SHELLVISOR_LOG": "error"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tempfile.gettempdir(),
        text=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if "MCP on http://" in line:
            return process, line.split("MCP on ", 1)[1].strip()
        assert line or process.poll() is None, f"the server exited: {process.poll()}"
    raise AssertionError("the server did not say where it listens")


def post(url: str, headers: dict[str, str], body: bytes = INITIALIZE) -> int:
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def refusals(url: str) -> None:
    assert post(url, {}) == 401, "no token"
    assert post(url, {"Authorization": "Bearer wrong"}) == 401, "a wrong token"
    assert post(url, {"Authorization": f"Basic {TOKEN}"}) == 401, "not a bearer token"
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert post(url, {**bearer, "Origin": "http://evil.example"}) == 403, "a foreign Origin"
    assert post(url, {**bearer, "Origin": "null"}) == 403, "an opaque Origin"
    assert post(url, {**bearer, "Host": "evil.example"}) == 403, "a foreign Host (DNS rebinding)"
    assert post(url.replace("/mcp", "/other"), bearer) == 404, "another path"
    port = url.rsplit(":", 1)[1].split("/")[0]
    assert post(url, {**bearer, "Origin": f"http://localhost:{port}"}) == 200, "a loopback Origin"
    assert post(url, bearer) == 200, "the token"
    print("ok   401 without the token, 403 for a foreign Origin or Host, 404 elsewhere", flush=True)


async def client(url: str):
    return create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})


# A whole 5 MiB artifact is one SSE event; the SDK's default limit is 1 MiB
# (a client that keeps it reads artifacts by range).
MAX_EVENT = 32 * 1024 * 1024


async def scenarios_over_http(url: str) -> None:
    async with await client(url) as http, streamable_http_client(url, http_client=http, max_sse_event_size=MAX_EVENT) as (read, write, *_):
        test_mcp.NOTIFICATIONS.clear()
        async with ClientSession(read, write, message_handler=test_mcp.collect_notifications) as session:
            with anyio.fail_after(30):
                await session.initialize()
            await test_mcp.run_scenarios(session, SCENARIOS, "http ")


async def clients_in_parallel_have_their_own_shell(url: str) -> None:
    """Two MCP client sessions at once: each has its own default shell."""
    async def one(name: str, results: dict) -> None:
        async with await client(url) as http, streamable_http_client(url, http_client=http, max_sse_event_size=MAX_EVENT) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool("bash", {"command": f"export WHO={name}; cd /tmp"})
                for _ in range(5):
                    result = await session.call_tool("bash", {"command": "echo $WHO $PWD"})
                    results.setdefault(name, set()).add(test_mcp.text(result).split("\n", 1)[0])

    results: dict = {}
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(one, "alpha", results)
            group.start_soon(one, "beta", results)
    assert results == {"alpha": {"alpha /tmp"}, "beta": {"beta /tmp"}}, results
    print("ok   two HTTP clients in parallel, each with its own shell", flush=True)


async def main() -> None:
    marker = f"SHELLVISOR_MCP_TEST_{uuid.uuid4().hex}"
    process, url = start(marker)
    try:
        refusals(url)
        await scenarios_over_http(url)
        await clients_in_parallel_have_their_own_shell(url)
        # A client's own default session ends with its MCP session (DELETE).
        async with await client(url) as http, streamable_http_client(url, http_client=http, max_sse_event_size=MAX_EVENT) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool("bash", {"command": "sleep 301 &"})
                assert any("sleep 301" in cmd for _, cmd in processes_with_env(f"MCP_SERVER_MARKER={marker}"))
        deadline = time.monotonic() + 10
        while any("sleep 301" in cmd for _, cmd in processes_with_env(f"MCP_SERVER_MARKER={marker}")):
            assert time.monotonic() < deadline, "the closed client's session still runs"
            time.sleep(0.05)
        print("ok   a client's default shell session ends with its MCP session", flush=True)
        # A background server left running in a named session (which
        # outlives the client), then SIGTERM: nothing outlives the server.
        async with await client(url) as http, streamable_http_client(url, http_client=http, max_sse_event_size=MAX_EVENT) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool("bash", {"command": "sleep 300 &", "session_id": "kept"})
        assert len(processes_with_env(f"MCP_SERVER_MARKER={marker}")) > 1
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 143, process.returncode
        deadline = time.monotonic() + 10
        while processes_with_env(f"MCP_SERVER_MARKER={marker}"):
            assert time.monotonic() < deadline, processes_with_env(f"MCP_SERVER_MARKER={marker}")
            time.sleep(0.05)
        print("ok   SIGTERM: the HTTP server exits 143 with nothing left behind", flush=True)
    finally:
        if process.poll() is None:
            process.kill()

    # No token configured: refused to start unless --no-auth is explicit.
    refused = subprocess.run(
        [BINARY, "mcp", "--http", "0"],
        env={k: v for k, v in os.environ.items() if k != "SHELLVISOR_MCP_TOKEN"},
        capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL,
    )
    assert refused.returncode != 0 and "needs a bearer token" in refused.stderr, refused
    print("ok   --http without a token is refused unless --no-auth", flush=True)


if __name__ == "__main__":
    anyio.run(main)
