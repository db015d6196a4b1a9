"""Drives `shellvisor serve` (JSON-RPC 2.0, one object per line) from a
small asyncio client with no shellvisor code in it.

Usage: test_serve.py <path to the shellvisor binary>
"""

import asyncio
import base64
import json
import os
import sys
import tempfile
import time
import uuid

from procs import processes_with_env

BINARY = sys.argv[1]
SCENARIO_DEADLINE = 60


class RpcError(Exception):
    def __init__(self, error: dict):
        super().__init__(f"{error['code']}: {error['message']}")
        self.code = error["code"]
        self.data = error.get("data")


class Client:
    """A JSON-RPC client over the server's stdin/stdout."""

    def __init__(self, process: asyncio.subprocess.Process):
        self.process = process
        self.next_id = 0
        self.pending: dict[object, asyncio.Future] = {}
        self.unmatched: asyncio.Queue = asyncio.Queue()  # responses with id null, and batches
        self.notifications: list[dict] = []
        self.notified = asyncio.Condition()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            line = await self.process.stdout.readline()
            if not line:
                return
            message = json.loads(line)
            if isinstance(message, list) or message.get("id") is None and "method" not in message:
                await self.unmatched.put(message)
            elif "method" in message:
                async with self.notified:
                    self.notifications.append(message)
                    self.notified.notify_all()
            else:
                future = self.pending.pop(message["id"], None)
                assert future is not None, f"response to an unknown id: {message}"
                future.set_result(message)

    async def send_line(self, line: bytes) -> None:
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()

    async def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        request_id = self.next_id
        future = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send_line(json.dumps(message).encode())
        return await future

    async def call(self, method: str, params: dict | None = None):
        response = await self.request(method, params)
        if "error" in response:
            raise RpcError(response["error"])
        return response["result"]

    async def wait_notification(self, predicate, timeout: float = 20) -> dict:
        async def find():
            async with self.notified:
                while True:
                    for note in self.notifications:
                        if predicate(note):
                            return note
                    await self.notified.wait()

        return await asyncio.wait_for(find(), timeout)


async def start(*args: str, marker: str, unprivileged: bool = False) -> Client:
    """The server as this user or, with `unprivileged` when the tests run as
    root (as in CI), as uid 65534 through `setpriv`."""
    command = [BINARY]
    if unprivileged and os.geteuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", BINARY]
    process = await asyncio.create_subprocess_exec(
        *command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "SERVE_MARKER": marker, "SHELLVISOR_LOG": "error"},
        cwd=tempfile.gettempdir(),
        limit=16 * 1024 * 1024,
    )
    return Client(process)


async def scenario_run_and_cwd(client: Client) -> None:
    opened = await client.call("session.open", {"session_id": "main"})
    assert opened == {"session_id": "main", "subscribed": True}, opened
    result = await client.call("run", {"session_id": "main", "request": {"command": "echo hi"}})
    assert result["kind"] == "completed" and result["output"] == "hi\n" and result["exit_code"] == 0, result
    work = os.path.realpath(tempfile.mkdtemp(prefix="shellvisor-serve-"))
    await client.call("run", {"session_id": "main", "request": {"command": f"cd {work} && export KEPT=yes"}})
    result = await client.call("run", {"session_id": "main", "request": {"command": "pwd; echo $KEPT"}})
    assert result["output"] == f"{work}\nyes\n", result
    failed = await client.call("run", {"session_id": "main", "request": {"command": "exit 7"}})
    assert failed["exit_code"] == 7 and failed["is_error"], failed


async def scenario_timeout(client: Client) -> None:
    # Auto-background is on at 1 s (this server's config), but a deadline that
    # comes first keeps the run in the foreground: it answers with its timeout.
    started = time.monotonic()
    result = await client.call(
        "run", {"session_id": "main", "request": {"command": "echo before; sleep 30", "timeout": 1}}
    )
    assert result["kind"] == "completed", result
    assert time.monotonic() - started < 15
    assert result["timed_out"] and result["output"] == "before\n", result
    assert result["text"].startswith("[Command timed out after 1 seconds]"), result["text"]


async def scenario_background(client: Client) -> None:
    # The server's config turns auto-background on at 1 s.
    outcome = await client.call("run", {"session_id": "main", "request": {"command": "sleep 2; echo done"}})
    assert outcome["kind"] == "backgrounded" and outcome["reason"] == "timer", outcome
    waited = await client.call("job.wait", {"session_id": "main", "job_id": outcome["job_id"], "timeout_ms": 20000})
    assert waited["result"]["output"] == "done\n", waited
    info = await client.call("job.info", {"session_id": "main", "job_id": outcome["job_id"]})
    assert info["state"] == "completed" and info["background"], info
    started = await client.call("run", {"session_id": "main", "request": {"command": "echo async", "async": True}})
    assert started["kind"] == "backgrounded" and started["reason"] == "requested", started
    done = await client.call("job.next_completion", {"session_id": "main", "timeout_ms": 20000})
    assert done["result"]["job_id"] == started["job_id"] and done["result"]["output"] == "async\n", done
    none = await client.call("job.next_completion", {"session_id": "main", "timeout_ms": 200})
    assert none == {"result": None}, none
    jobs = await client.call("job.list", {"session_id": "main"})
    assert any(job["job_id"] == started["job_id"] for job in jobs["jobs"]), jobs
    assert "next_cursor" not in jobs and jobs["retained"] == len(jobs["jobs"]), jobs
    # A page at a time: the pages follow each other and together list them all.
    first = await client.call("job.list", {"session_id": "main", "limit": 1})
    assert len(first["jobs"]) == 1 and first["retained"] == len(jobs["jobs"]), first
    rest = await client.call("job.list", {"session_id": "main", "cursor": first["next_cursor"]})
    assert [j["job_id"] for j in first["jobs"] + rest["jobs"]] == [j["job_id"] for j in jobs["jobs"]], rest


async def scenario_pty(client: Client) -> None:
    await client.call("session.open", {"session_id": "term"})
    started = await client.call(
        "pty.start", {"session_id": "term", "request": {"command": "read -p 'name? ' n; echo hi $n"}}
    )
    job_id = started["job_id"]
    await client.wait_notification(
        lambda n: n["method"] == "pty.state"
        and n["params"]["job_id"] == job_id
        and n["params"]["state"]["state"] == "awaiting_input"
    )
    screen = await client.call("pty.screen", {"session_id": "term", "job_id": job_id})
    assert screen["lines"][0] == "name?", screen["lines"][:2]
    assert await client.call("pty.state", {"session_id": "term", "job_id": job_id}) == {"state": "awaiting_input"}
    size = await client.call("pty.resize", {"session_id": "term", "job_id": job_id, "cols": 100, "rows": 30})
    assert size == {"cols": 100, "rows": 30}, size
    await client.call("pty.write", {"session_id": "term", "job_id": job_id, "text": "bob"})
    # A 100 KB key name is refused by name and length; the server lives on.
    try:
        await client.call("pty.key", {"session_id": "term", "job_id": job_id, "key": "M-" * 50_000})
        raise AssertionError("a 100 KB key name was accepted")
    except RpcError as err:
        assert err.code == -32000 and err.data["code"] == "invalid_request", err.data
        assert "Key name too long: 100000 bytes" in str(err) and len(str(err)) < 300, str(err)[:300]
    assert (await client.call("runtime.info"))["version"]
    await client.call("pty.key", {"session_id": "term", "job_id": job_id, "key": "Enter"})
    waited = await client.call("job.wait", {"session_id": "term", "job_id": job_id, "timeout_ms": 20000})
    assert waited["result"]["exit_code"] == 0 and "hi bob" in waited["result"]["output"], waited


async def scenario_kill(client: Client) -> None:
    marker = f"KILL_{uuid.uuid4().hex}"
    await client.call("session.open", {"session_id": "kill"})
    run = asyncio.create_task(
        client.call("run", {"session_id": "kill", "request": {"command": "sleep 60", "env": {"KILL_MARKER": marker}}})
    )
    note = await client.wait_notification(
        lambda n: n["method"] == "job.started" and n["params"]["session_id"] == "kill"
    )
    deadline = time.monotonic() + 10
    while not processes_with_env(f"KILL_MARKER={marker}"):
        assert time.monotonic() < deadline, "sleep never started"
        await asyncio.sleep(0.02)
    await client.call("job.kill", {"session_id": "kill", "job_id": note["params"]["job_id"]})
    result = await asyncio.wait_for(run, 20)
    assert result["killed"], result
    assert not processes_with_env(f"KILL_MARKER={marker}")


async def scenario_twenty_sessions(client: Client) -> None:
    async def one(i: int) -> None:
        session = f"s{i}"
        await client.call("session.open", {"session_id": session, "subscribe": False})
        result = await client.call(
            "run", {"session_id": session, "request": {"command": f"export N={i}; sleep 0.3; echo s$N", "cwd": "/"}}
        )
        assert result["output"] == f"s{i}\n", result
        again = await client.call("run", {"session_id": session, "request": {"command": "echo $N; pwd"}})
        assert again["output"] == f"{i}\n/\n", again

    started = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(20)))
    # Twenty 0.3 s sleeps ran at the same time, not one after another.
    assert time.monotonic() - started < 5.5, time.monotonic() - started


async def scenario_streamed_bytes(client: Client) -> None:
    payload = os.urandom(300_000) + b"\x00\xff\xfe no newline at the end"
    path = os.path.join(tempfile.mkdtemp(prefix="shellvisor-bytes-"), "payload")
    with open(path, "wb") as f:
        f.write(payload)
    await client.call("session.open", {"session_id": "bytes"})
    result = await client.call("run", {"session_id": "bytes", "request": {"command": f"cat {path}"}})
    job_id = result["job_id"]
    assert result["truncation"]["total_bytes"] == len(payload), result["truncation"]
    await client.wait_notification(lambda n: n["method"] == "job.finished" and n["params"]["job_id"] == job_id)
    chunks = sorted(
        (n["params"]["offset"], base64.b64decode(n["params"]["data_base64"]))
        for n in client.notifications
        if n["method"] == "output" and n["params"]["job_id"] == job_id
    )
    assert not any(n["method"] == "lagged" for n in client.notifications)
    streamed = b""
    for offset, data in chunks:
        assert offset == len(streamed), (offset, len(streamed))
        streamed += data
    assert streamed == payload, (len(streamed), len(payload))
    # The same bytes read back by offset.
    read = b""
    while len(read) < len(payload):
        chunk = await client.call(
            "job.output", {"session_id": "bytes", "job_id": job_id, "offset": len(read), "max_bytes": 100_000}
        )
        read += base64.b64decode(chunk["data_base64"])
    assert read == payload


MALFORMED = [
    (b"not json", -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"run"', -32700, None),
    (b"\xff\xfe", -32700, None),
    (b"[]", -32600, None),
    (b"42", -32600, None),
    (b'"text"', -32600, None),
    (b"null", -32600, None),
    (b"{}", -32600, None),
    (b'{"jsonrpc":"1.0","id":101,"method":"run"}', -32600, 101),
    (b'{"jsonrpc":"2.0","id":102}', -32600, 102),
    (b'{"jsonrpc":"2.0","id":103,"method":5}', -32600, 103),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"run"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":4.5,"method":"run"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":105,"method":"run","params":"x"}', -32600, 105),
    (b'{"jsonrpc":"2.0","id":106,"method":"run","extra":true}', -32600, 106),
    (b'{"jsonrpc":"2.0","id":107,"method":"no.such.method"}', -32601, 107),
    (b'{"jsonrpc":"2.0","id":108,"method":"run","params":[1,2]}', -32602, 108),
    (b'{"jsonrpc":"2.0","id":109,"method":"run","params":{}}', -32602, 109),
    (b'{"jsonrpc":"2.0","id":110,"method":"run","params":{"session_id":"m","request":{}}}', -32602, 110),
    (b'{"jsonrpc":"2.0","id":111,"method":"run","params":{"session_id":"m","request":{"command":"true","bogus":1}}}', -32602, 111),
    (b'{"jsonrpc":"2.0","id":112,"method":"run","params":{"session_id":"m","request":{"command":"true","timeout":"soon"}}}', -32602, 112),
    (b'{"jsonrpc":"2.0","id":113,"method":"job.output","params":{"session_id":"m","job_id":"job_x","offset":-1}}', -32602, 113),
    (b'{"jsonrpc":"2.0","id":114,"method":"pty.write","params":{"session_id":"m","job_id":"job_x"}}', -32602, 114),
    (b'{"jsonrpc":"2.0","id":115,"method":"pty.write","params":{"session_id":"m","job_id":"job_x","data_base64":"!!"}}', -32602, 115),
    (b'{"jsonrpc":"2.0","id":116,"method":"runtime.info","params":{"x":1}}', -32602, 116),
    (b'{"jsonrpc":"2.0","id":117,"method":"run","params":{"session_id":"m","request":{"command":"true","env":{"1BAD":"x"}}}}', -32000, 117),
    (b'{"jsonrpc":"2.0","id":118,"method":"run","params":{"session_id":"m","request":{"command":"true","cwd":"/nonexistent/dir"}}}', -32000, 118),
    (b'{"jsonrpc":"2.0","id":119,"method":"job.info","params":{"session_id":"m","job_id":"job_nope"}}', -32000, 119),
    (b'{"jsonrpc":"2.0","id":120,"method":"pty.screen","params":{"session_id":"m","job_id":"job_nope"}}', -32000, 120),
    # Over the size limit: answered with the id, wherever the client put it.
    (b'{"jsonrpc":"2.0","id":121,"method":"' + b"x" * (2 * 1024 * 1024) + b'"}', -32600, 121),
    (b'{"method":"run","params":{"s":"' + b"x" * (2 * 1024 * 1024) + b'"},"jsonrpc":"2.0","id":122}', -32600, 122),
    (b'{"method":"' + b"x" * (2 * 1024 * 1024) + b'"}', -32600, None),
]
RUNTIME_CODES = {117: "invalid_env_name", 118: "invalid_cwd", 119: "job_not_found", 120: "job_not_found"}


async def scenario_malformed(client: Client) -> None:
    assert len(MALFORMED) >= 20
    for line, code, request_id in MALFORMED:
        await client.send_line(line)
        if request_id is None:
            response = await asyncio.wait_for(client.unmatched.get(), 10)
        else:
            future = asyncio.get_running_loop().create_future()
            client.pending[request_id] = future
            response = await asyncio.wait_for(future, 10)
        assert response["jsonrpc"] == "2.0" and response["id"] == request_id, (line[:80], response)
        assert response["error"]["code"] == code, (line[:80], response)
        if request_id in RUNTIME_CODES:
            assert response["error"]["data"]["code"] == RUNTIME_CODES[request_id], response
    # A batch is answered as a batch, in order; a notification gets no answer.
    await client.send_line(
        b'[{"jsonrpc":"2.0","id":"b1","method":"runtime.info"},'
        b'{"jsonrpc":"2.0","method":"no.such.notification"},'
        b'{"jsonrpc":"2.0","id":"b2","method":"nope"}]'
    )
    batch = await asyncio.wait_for(client.unmatched.get(), 10)
    assert [answer["id"] for answer in batch] == ["b1", "b2"], batch
    assert "result" in batch[0] and batch[1]["error"]["code"] == -32601, batch
    assert client.unmatched.empty()
    # Still serving.
    info = await client.call("runtime.info")
    assert info["version"], info


def alive(marker: str, command: str) -> bool:
    return any(cmd.strip() == command for _, cmd in processes_with_env(marker))


async def until(predicate, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def scenario_a_dev_server_outlives_later_kills(client: Client) -> None:
    """The kill contract (issue 14): `npm run dev &` then a call that times
    out, one that is cancelled, a killed async job and an `exit`: the server
    started by the first call lives on; closing the session ends it."""
    marker = f"DEV_MARKER={uuid.uuid4().hex}"
    name, value = marker.split("=")
    await client.call("session.open", {"session_id": "dev"})
    started = await client.call(
        "run", {"session_id": "dev", "request": {"command": "sleep 777 & echo started", "env": {name: value}}}
    )
    assert started["output"] == "started\n", started
    await until(lambda: alive(marker, "sleep 777"), "the server never started")
    timed_out = await client.call("run", {"session_id": "dev", "request": {"command": "sleep 30", "timeout": 1}})
    assert timed_out["timed_out"] and timed_out["text"].startswith("[Command timed out after 1 seconds]"), timed_out
    assert alive(marker, "sleep 777"), "a later timeout killed the server"
    client.notifications.clear()
    cancelled = asyncio.create_task(client.call("run", {"session_id": "dev", "request": {"command": "sleep 31"}}))
    note = await client.wait_notification(
        lambda n: n["method"] == "job.started" and n["params"]["session_id"] == "dev"
    )
    await client.call("job.kill", {"session_id": "dev", "job_id": note["params"]["job_id"]})
    result = await asyncio.wait_for(cancelled, 20)
    assert result["killed"], result
    assert alive(marker, "sleep 777"), "a cancel killed the server"
    job = await client.call("run", {"session_id": "dev", "request": {"command": "sleep 32", "async": True}})
    await client.call("job.kill", {"session_id": "dev", "job_id": job["job_id"]})
    assert alive(marker, "sleep 777"), "job.kill killed the server"
    exited = await client.call("run", {"session_id": "dev", "request": {"command": "exit 3"}})
    assert exited["exit_code"] == 3 and exited["shell_restarted"], exited
    assert alive(marker, "sleep 777"), "exit killed the server"
    await client.call("session.close", {"session_id": "dev"})
    await until(lambda: not alive(marker, "sleep 777"), "closing the session left the server")


async def scenario_a_term_trap_does_not_hide_a_timeout(client: Client) -> None:
    await client.call("run", {"session_id": "trap", "request": {"command": "cd / && trap 'echo trapped' TERM"}})
    result = await client.call("run", {"session_id": "trap", "request": {"command": "sleep 30", "timeout": 1}})
    assert result["timed_out"] and not result["killed"] and result["exit_code"] is None, result
    assert result["text"].startswith("[Command timed out after 1 seconds]"), result["text"]
    assert "trapped" in result["output"], result
    after = await client.call("run", {"session_id": "trap", "request": {"command": "pwd"}})
    assert after["output"] == "/\n", after


async def scenario_a_timed_out_run_loses_its_own_escapees(client: Client) -> None:
    marker = f"ESC_MARKER={uuid.uuid4().hex}"
    name, value = marker.split("=")
    command = "sleep 302 & setsid sleep 303 & (setsid sh -c 'sleep 304 & sleep 305' &); sleep 30"
    result = await client.call(
        "run", {"session_id": "esc", "request": {"command": command, "timeout": 2, "env": {name: value}}}
    )
    assert result["timed_out"], result
    await until(
        lambda: not any(alive(marker, f"sleep {n}") for n in (302, 303, 304, 305, 30)),
        f"the run's children outlived it: {processes_with_env(marker)}",
    )


async def scenario_per_call_auto_background(client: Client) -> None:
    # The server does not auto-background; the call asks for it itself.
    started = time.monotonic()
    answer = await client.call(
        "run", {"session_id": "per-call", "request": {"command": "sleep 3; echo x", "auto_background_after": 1}}
    )
    assert answer["kind"] == "backgrounded" and time.monotonic() - started < 2.5, answer
    waited = await client.call("job.wait", {"session_id": "per-call", "job_id": answer["job_id"], "timeout_ms": 20000})
    assert waited["result"]["output"] == "x\n", waited
    try:
        await client.call("run", {"session_id": "per-call", "request": {"command": "true", "auto_background_after": -1}})
        raise AssertionError("a negative auto_background_after was accepted")
    except RpcError as err:
        assert err.code == -32602 and "between 0 and 86400 seconds" in str(err), str(err)


async def scenario_long_running_work(client: Client) -> None:
    # Issue 15 through a plain JSON-RPC client: readiness, the idle timeout,
    # per-run notifications on an unsubscribed connection, a wait on several jobs.
    sid = "long-work"
    opened = await client.call("session.open", {"session_id": sid, "subscribe": False})
    assert opened["subscribed"] is False, opened
    started = time.monotonic()
    server = await client.call("run", {"session_id": sid, "request": {
        "command": "python3 -u -m http.server 0 --bind 127.0.0.1", "wait_for": {"output": "Serving HTTP"}}})
    assert time.monotonic() - started < 2, time.monotonic() - started
    assert server["kind"] == "backgrounded" and server["reason"] == "ready", server
    port = int(server["preview"].split("port ")[1].split()[0])
    fetched = await client.call("run", {"session_id": sid, "request": {
        "command": f"python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:{port}/\").status)'"}})
    assert fetched["output"] == "200\n", fetched

    started = time.monotonic()
    idle = await client.call("run", {"session_id": sid, "request": {"command": "echo a; sleep 5; echo b", "idle_timeout": 1}})
    took = time.monotonic() - started
    assert 0.9 < took < 3, took
    assert idle["timed_out"] and idle["timeout_reason"] == "idle" and idle["output"] == "a\n", idle
    assert idle["text"].startswith("[Command produced no output for 1 seconds]"), idle["text"]

    # limits: a cgroup for the run as root; as an unprivileged user, the
    # closest rlimit, and the result says what could not be enforced.
    info = await client.call("runtime.info")
    limited = await client.call("run", {"session_id": sid, "request": {
        "command": "python3 -c 'b = bytearray(256 * 1024 * 1024); print(\"allocated\")'",
        "limits": {"memory_mb": 64, "pids": 50}}})
    report = limited["limits"]
    if info["containment"]["layer"] == "cgroup":
        assert limited["exit_code"] == 137 and "[Killed: memory limit 64 MiB reached]" in limited["text"], limited
        assert report["reached"] == ["memory_mb"] and not report["not_enforced"], report
    else:
        assert limited["exit_code"] == 1 and "MemoryError" in limited["output"], limited
        assert any(how.startswith("memory_mb (RLIMIT_AS") for how in report["enforced"]), report
        assert [how.split()[0] for how in report["not_enforced"]] == ["pids"], report
        assert "Limits not enforced here: pids" in limited["text"], limited["text"]

    # notify_on: this connection is not subscribed, yet it hears this run.
    job = await client.call("run", {"session_id": sid, "notify_on": ["output", "exit", "ready"], "request": {
        "command": "for i in $(seq 1 10); do echo line $i; sleep 0.05; done; echo up; sleep 0.3",
        "async": True, "wait_for": {"output": "^up$"}}})
    job_id = job["job_id"]
    finished = await client.wait_notification(
        lambda n: n["method"] == "job.finished" and n["params"]["job_id"] == job_id)
    assert finished["params"]["exit_code"] == 0, finished
    mine = [n for n in client.notifications if n["params"].get("job_id") == job_id]
    streamed = b"".join(base64.b64decode(n["params"]["data_base64"]) for n in mine if n["method"] == "output")
    assert streamed == b"".join(f"line {i}\n".encode() for i in range(1, 11)) + b"up\n", streamed
    ready = [n for n in mine if n["method"] == "job.ready"]
    assert len(ready) == 1 and ready[0]["params"]["what"] == "output matching `^up$`", ready
    assert not any(n["method"] == "job.started" for n in mine), "a kind it did not ask for"
    assert not any(n["params"].get("job_id") == server["job_id"] for n in client.notifications), \
        "another run's notifications reached an unsubscribed connection"

    # The flood guard: 8 MiB at once reaches the client cut to the streaming
    # budget, with the range left out announced; job.output has all of it.
    flood = await client.call("run", {"session_id": sid, "notify_on": ["output", "exit"], "request": {
        "command": "head -c 8388608 /dev/zero", "async": True}})
    await client.wait_notification(lambda n: n["method"] == "job.finished" and n["params"]["job_id"] == flood["job_id"])
    cursor = 0
    suppressed = 0
    for note in client.notifications:
        params = note["params"]
        if params.get("job_id") != flood["job_id"]:
            continue
        if note["method"] == "output":
            assert params["offset"] == cursor, (params["offset"], cursor)
            cursor += len(base64.b64decode(params["data_base64"]))
        elif note["method"] == "output.suppressed":
            assert params["offset"] == cursor and params["suppressed_events"] > 0, params
            cursor += params["suppressed_bytes"]
            suppressed += params["suppressed_bytes"]
    assert cursor == 8388608 and suppressed > 0, (cursor, suppressed)
    tail = await client.call("job.output", {"session_id": sid, "job_id": flood["job_id"], "offset": 8388600})
    assert base64.b64decode(tail["data_base64"]) == b"\0" * 8, tail

    # A wait on several jobs answers with the first to finish.
    slow = await client.call("run", {"session_id": sid, "request": {"command": "sleep 30", "async": True}})
    quick = await client.call("run", {"session_id": sid, "request": {"command": "sleep 0.5; echo quick", "async": True}})
    started = time.monotonic()
    waited = await client.call("job.wait", {"session_id": sid, "job_ids": [slow["job_id"], quick["job_id"]], "timeout_ms": 20000})
    assert waited["result"]["job_id"] == quick["job_id"] and waited["result"]["output"] == "quick\n", waited
    assert time.monotonic() - started < 5
    none = await client.call("job.wait", {"session_id": sid, "job_ids": [slow["job_id"], server["job_id"]], "timeout_ms": 300})
    assert none == {"result": None}, none
    try:
        await client.call("job.wait", {"session_id": sid, "job_ids": []})
        raise AssertionError("an empty job_ids was accepted")
    except RpcError as err:
        assert err.code == -32602 and "job_ids" in str(err), str(err)
    try:
        await client.call("run", {"session_id": sid, "request": {"command": "true", "wait_for": {"output": "("}}})
        raise AssertionError("an invalid regex was accepted")
    except RpcError as err:
        assert err.data["code"] == "invalid_request" and "not a valid regex" in str(err), str(err)
    await client.call("session.close", {"session_id": sid})


async def kill_contract(unprivileged: bool) -> None:
    """The kill contract and long-running work through `serve` with the
    default configuration (no auto-background: the runs time out in the
    foreground), as this user and as an unprivileged one."""
    marker = f"CONTRACT_{uuid.uuid4().hex}"
    client = await start("serve", marker=marker, unprivileged=unprivileged)
    if unprivileged:
        info = await client.call("runtime.info")
        assert info["containment"]["layer"] == "pid_namespace", info["containment"]
    for scenario in [
        scenario_a_dev_server_outlives_later_kills,
        scenario_a_term_trap_does_not_hide_a_timeout,
        scenario_a_timed_out_run_loses_its_own_escapees,
        scenario_per_call_auto_background,
        scenario_long_running_work,
    ]:
        started = time.monotonic()
        await asyncio.wait_for(scenario(client), SCENARIO_DEADLINE)
        user = "unprivileged" if unprivileged else "as this user"
        print(f"ok   {scenario.__name__} {user} ({time.monotonic() - started:.2f} s)", flush=True)
    client.process.stdin.close()
    await asyncio.wait_for(client.process.wait(), 20)
    await until(lambda: not processes_with_env(f"SERVE_MARKER={marker}"), "the server left processes")


RC = """case $- in *i*) ;; *) return;; esac
export RC_NAME=snapshot
greet() { echo "hello from the $RC_NAME"; }
alias ll='echo listing'
"""


async def snapshot_and_init(unprivileged: bool) -> None:
    """The user's shell snapshot (`shell.snapshot`), the configured init
    (`shell.init`) and a session's own (`session.open`'s `init`), with a
    failing init reported once in the run's notices and in `runtime.info`."""
    home = tempfile.mkdtemp(prefix="shellvisor-serve-home-")
    os.chmod(home, 0o755)
    rc = os.path.join(home, "rc.bash")
    with open(rc, "w") as f:
        f.write(RC)
    os.chmod(rc, 0o644)
    config = os.path.join(home, "config.toml")
    with open(config, "w") as f:
        f.write(f'[shell]\nsnapshot = "{rc}"\ninit = "export FROM_CONFIG=1"\ninit_timeout_ms = 2000\n')
    os.chmod(config, 0o644)
    marker = f"INIT_{uuid.uuid4().hex}"
    client = await start("serve", "--config", config, marker=marker, unprivileged=unprivileged)
    info = await client.call("runtime.info")
    assert info["warnings"] == [], info
    await client.call("session.open", {"session_id": "plain", "subscribe": False})
    result = await client.call("run", {"session_id": "plain", "request": {"command": "greet; ll; echo $FROM_CONFIG"}})
    assert result["output"] == "hello from the snapshot\nlisting\n1\n", result
    await client.call("session.open", {"session_id": "own", "subscribe": False, "init": "export OWN=2"})
    result = await client.call(
        "run", {"session_id": "own", "request": {"command": "greet; echo \"${FROM_CONFIG-unset} $OWN\""}}
    )
    assert result["output"] == "hello from the snapshot\nunset 2\n", result
    assert result["notices"] == [], result
    await client.call("session.open", {"session_id": "bad", "subscribe": False, "init": "exit 4"})
    result = await client.call("run", {"session_id": "bad", "request": {"command": "echo still works"}})
    assert result["output"] == "still works\n", result
    assert any("init was abandoned" in n for n in result["notices"]), result
    info = await client.call("runtime.info")
    assert len(info["warnings"]) == 1 and info["warnings"][0].startswith("session bad: "), info
    client.process.stdin.close()
    await asyncio.wait_for(client.process.wait(), 20)
    await until(lambda: not processes_with_env(f"SERVE_MARKER={marker}"), "the server left processes")
    user = "unprivileged" if unprivileged else "as this user"
    print(f"ok   snapshot and init through serve {user}", flush=True)


async def main() -> None:
    config = os.path.join(tempfile.mkdtemp(prefix="shellvisor-serve-config-"), "config.toml")
    with open(config, "w") as f:
        f.write("[jobs]\nauto_background = true\nauto_background_secs = 1\n")
    marker = f"SERVE_{uuid.uuid4().hex}"
    client = await start("serve", "--config", config, marker=marker)
    for scenario in [
        scenario_run_and_cwd,
        scenario_timeout,
        scenario_background,
        scenario_pty,
        scenario_kill,
        scenario_twenty_sessions,
        scenario_streamed_bytes,
        scenario_malformed,
    ]:
        started = time.monotonic()
        await asyncio.wait_for(scenario(client), SCENARIO_DEADLINE)
        print(f"ok   {scenario.__name__} ({time.monotonic() - started:.2f} s)", flush=True)
    # A long-running job, then end of input: the server shuts down and kills it.
    await client.call("run", {"session_id": "main", "request": {"command": "sleep 60", "async": True}})
    client.process.stdin.close()
    await asyncio.wait_for(client.process.wait(), 20)
    assert client.process.returncode == 0, client.process.returncode
    deadline = time.monotonic() + 10
    while processes_with_env(f"SERVE_MARKER={marker}"):
        assert time.monotonic() < deadline, processes_with_env(f"SERVE_MARKER={marker}")
        await asyncio.sleep(0.05)
    print("ok   end of input shut the server down with nothing left", flush=True)


async def socket_mode() -> None:
    """`serve --socket`: connections share the runtime; SIGTERM stops it."""
    marker = f"SOCKET_{uuid.uuid4().hex}"
    path = os.path.join(tempfile.mkdtemp(prefix="shellvisor-sock-"), "rpc.sock")
    process = await asyncio.create_subprocess_exec(
        BINARY, "serve", "--socket", path, env={**os.environ, "SOCKET_MARKER": marker}
    )
    deadline = time.monotonic() + 20
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "the socket never appeared"
        await asyncio.sleep(0.02)
    assert os.stat(path).st_mode & 0o777 == 0o600

    async def call(reader, writer, request_id, method, params):
        writer.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n")
        await writer.drain()
        while True:
            message = json.loads(await reader.readline())
            if message.get("id") == request_id:
                return message["result"]

    first = await asyncio.open_unix_connection(path)
    second = await asyncio.open_unix_connection(path)
    await call(*first, 1, "run", {"session_id": "shared", "request": {"command": "export FROM_FIRST=1; sleep 60 &"}})
    seen = await call(*second, 1, "run", {"session_id": "shared", "request": {"command": "echo $FROM_FIRST"}})
    assert seen["output"] == "1\n", seen
    first[1].close()
    # The runtime outlives a connection...
    again = await call(*second, 2, "run", {"session_id": "shared", "request": {"command": "echo still"}})
    assert again["output"] == "still\n", again
    # ...and a client that goes mid-run takes its run along, at once; the
    # session's shell and its directory stay for the next connection.
    workdir = tempfile.mkdtemp(prefix="shellvisor-sock-cwd-")
    await call(*second, 3, "run", {"session_id": "shared", "request": {"command": f"cd {workdir}"}})
    third = await asyncio.open_unix_connection(path)
    run_marker = f"SOCKET_RUN={uuid.uuid4().hex}"
    name, value = run_marker.split("=")
    request = {"command": "sleep 61", "env": {name: value}, "timeout": 120}
    third[1].write(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {"session_id": "shared", "request": request}}).encode()
        + b"\n"
    )
    await third[1].drain()
    await until(lambda: alive(run_marker, "sleep 61"), "the run never started")
    third[1].close()
    closed = time.monotonic()
    await until(lambda: not alive(run_marker, "sleep 61"), "the run outlived its connection", timeout=10)
    gone_after = time.monotonic() - closed
    assert gone_after < 1.0, f"the run lived {gone_after:.2f} s after its client went"
    here = await call(*second, 4, "run", {"session_id": "shared", "request": {"command": "pwd"}})
    assert here["output"] == f"{workdir}\n", here
    leftovers = [n for n in os.listdir(os.path.dirname(path)) if n != "rpc.sock"]
    assert not leftovers, leftovers
    # ...and SIGTERM ends it, with everything it started.
    process.terminate()
    await asyncio.wait_for(process.wait(), 20)
    assert not os.path.exists(path)
    deadline = time.monotonic() + 10
    while processes_with_env(f"SOCKET_MARKER={marker}"):
        assert time.monotonic() < deadline, processes_with_env(f"SOCKET_MARKER={marker}")
        await asyncio.sleep(0.05)
    print("ok   socket mode: shared runtime, a client gone mid-run, SIGTERM leaves nothing", flush=True)


async def socket_out_of_descriptors() -> None:
    """`serve --socket` with few descriptors: connections beyond them fail to
    be accepted for a while, and the server goes on serving once they close."""
    path = os.path.join(tempfile.mkdtemp(prefix="shellvisor-sock-fds-"), "rpc.sock")
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", 'ulimit -n 64 && exec "$0" serve --socket "$1"', BINARY, path,
        stderr=asyncio.subprocess.PIPE,
    )
    await until(lambda: os.path.exists(path), "the socket never appeared", timeout=20)
    hold = []
    for _ in range(100):
        hold.append(await asyncio.open_unix_connection(path))

    async def retried() -> None:
        while b"retrying" not in await process.stderr.readline():
            assert process.returncode is None, "the server ended"

    # The server runs out of descriptors, says so, and keeps listening; the
    # ones it could not accept stay queued. Close them all.
    await asyncio.wait_for(retried(), 20)
    for reader, writer in hold:
        writer.close()
    assert process.returncode is None
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(b'{"jsonrpc":"2.0","id":1,"method":"run","params":{"session_id":"fds","request":{"command":"echo served"}}}\n')
    await writer.drain()
    answer = json.loads(await asyncio.wait_for(reader.readline(), 20))
    assert answer["result"]["output"] == "served\n", answer
    writer.close()
    process.terminate()
    await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, process.returncode
    print("ok   socket mode: out of descriptors, then served again", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
    asyncio.run(socket_mode())
    asyncio.run(socket_out_of_descriptors())
    asyncio.run(kill_contract(unprivileged=False))
    asyncio.run(kill_contract(unprivileged=True))
    asyncio.run(snapshot_and_init(unprivileged=False))
    asyncio.run(snapshot_and_init(unprivileged=True))
