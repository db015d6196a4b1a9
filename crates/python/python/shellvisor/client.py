"""The asyncio client: one connection to `shellvisor serve` (a child process
over stdio, or a Unix socket), sessions, jobs and terminals on it."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
from typing import Any, AsyncIterator, Optional, Sequence

from ._binary import find_binary
from .errors import ConnectionClosed, from_rpc
from .types import (
    Event,
    JobInfo,
    OutputChunk,
    RunOutcome,
    RunResult,
    RuntimeInfo,
    Screen,
    outcome_from_json,
)

# A response carries at most the run's shown output or one output read; the
# server bounds both well below this.
_LINE_LIMIT = 64 * 1024 * 1024
# How long a closing server may take to end everything it started.
_CLOSE_GRACE = 15.0


class Client:
    """A connection to a shellvisor runtime.

    By default it starts `shellvisor serve` as a child process speaking
    JSON-RPC on its stdin/stdout; the child (and everything it started) ends
    when the client closes, or when this Python process exits, since its
    stdin then closes. With `socket=PATH` it connects to a running
    `shellvisor serve --socket PATH` instead (sessions outlive the
    connection there).

        async with Client() as sv:
            session = await sv.session("agent-1")
            print((await session.run("echo hi")).output)
    """

    def __init__(
        self,
        *,
        binary: Optional[str] = None,
        socket: Optional[str] = None,
        config: Optional[str] = None,
        args: Sequence[str] = (),
        env: Optional[dict[str, str]] = None,
        stderr: Any = None,
    ) -> None:
        self._binary = binary
        self._socket = socket
        self._config = config
        self._args = list(args)
        self._env = env
        self._stderr = stderr
        self._process: Optional[asyncio.subprocess.Process] = None
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._reading: Optional[asyncio.Task] = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._subscribers: dict[str, list[asyncio.Queue]] = {}
        self._closed = False

    async def __aenter__(self) -> "Client":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def start(self) -> None:
        """Starts the server (or connects to its socket)."""
        if self._socket is not None:
            self._reader, self._writer = await asyncio.open_unix_connection(self._socket, limit=_LINE_LIMIT)
        else:
            command = [self._binary or find_binary(), "serve", *self._args]
            if self._config is not None:
                command[2:2] = ["--config", self._config]
            environment = dict(os.environ)
            environment.setdefault("SHELLVISOR_LOG", "error")
            environment.update(self._env or {})
            self._process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self._stderr,
                env=environment,
                limit=_LINE_LIMIT,
            )
            self._reader, self._writer = self._process.stdout, self._process.stdin
        self._reading = asyncio.get_running_loop().create_task(self._read_loop())

    async def close(self) -> None:
        """Closes the connection; a child server shuts down (killing what it
        started) and is waited for."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._writer.close()
        if self._process is not None:
            try:
                await asyncio.wait_for(self._process.wait(), _CLOSE_GRACE)
            except asyncio.TimeoutError:
                self._process.kill()
                await self._process.wait()
        if self._reading is not None:
            try:
                await asyncio.wait_for(self._reading, 5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._reading.cancel()
        self._fail_pending()

    async def request(self, method: str, params: Optional[dict[str, Any]] = None) -> Any:
        """Sends one JSON-RPC request and returns its result (raising
        `ShellvisorError` with the stable code on an error)."""
        if self._closed or self._writer is None:
            raise ConnectionClosed()
        ident = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        message = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        try:
            self._writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as err:
            self._pending.pop(ident, None)
            raise ConnectionClosed(f"writing to the shellvisor server: {err}") from err
        try:
            return await future
        finally:
            self._pending.pop(ident, None)

    async def session(
        self, session_id: str, *, subscribe: bool = False, init: str | None = None
    ) -> "Session":
        """Opens (or joins) a session; with `subscribe`, `Session.events()`
        yields its notifications (output, job started/finished/ready, ...).
        `init` is shell text every new shell of a session this creates runs
        before its first command (`source .venv/bin/activate`)."""
        session = Session(self, session_id)
        if subscribe:
            session._events = asyncio.Queue()
            self._subscribers.setdefault(session_id, []).append(session._events)
        params: dict[str, Any] = {"session_id": session_id, "subscribe": subscribe}
        if init is not None:
            params["init"] = init
        await self.request("session.open", params)
        return session

    async def info(self) -> RuntimeInfo:
        return RuntimeInfo.from_json(await self.request("runtime.info"))

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict):
                    self._dispatch(message)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._fail_pending()
            for queues in self._subscribers.values():
                for queue in queues:
                    queue.put_nowait(None)

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" not in message:
            params = message.get("params") or {}
            if message["method"] == "output" and "data_base64" in params:
                params = {**params, "data": base64.b64decode(params.pop("data_base64"))}
            event = Event(message["method"], params)
            for queue in self._subscribers.get(params.get("session_id", ""), []):
                queue.put_nowait(event)
            return
        future = self._pending.get(message.get("id"))
        if future is None or future.done():
            return
        if "error" in message:
            future.set_exception(from_rpc(message["error"]))
        else:
            future.set_result(message.get("result"))

    def _fail_pending(self) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionClosed())
        self._pending.clear()


def _run_request(command: str, options: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {"command": command}
    for key, value in options.items():
        if value is not None and value is not False:
            request[key] = value
    return request


class Session:
    """A persistent shell session: `cd` and exported variables carry over
    between runs."""

    def __init__(self, client: Client, session_id: str) -> None:
        self.client = client
        self.id = session_id
        self._events: Optional[asyncio.Queue] = None

    async def run(
        self,
        command: str,
        *,
        env: Optional[dict[str, str]] = None,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
        pty: bool = False,
        background: bool = False,
        cols: Optional[int] = None,
        rows: Optional[int] = None,
        auto_background_after: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        wait_for: Optional[dict[str, Any]] = None,
        limits: Optional[dict[str, int]] = None,
        notify_on: Optional[Sequence[str]] = None,
    ) -> RunOutcome:
        """Runs `command` (bash text, as written) and returns its
        `RunResult`, or `Backgrounded` when it went to the background
        (`background=True`, the auto-background timer, `wait_for` held, or a
        terminal waiting for input)."""
        request = _run_request(command, {
            "env": env, "timeout": timeout, "cwd": cwd, "pty": pty, "async": background, "cols": cols,
            "rows": rows, "auto_background_after": auto_background_after, "idle_timeout": idle_timeout,
            "wait_for": wait_for, "limits": limits,
        })
        params: dict[str, Any] = {"session_id": self.id, "request": request}
        if notify_on:
            params["notify_on"] = list(notify_on)
        return outcome_from_json(await self.client.request("run", params))

    async def start_pty(self, command: str, **options: Any) -> "Pty":
        """Starts `command` on a pseudo-terminal and returns it at once."""
        request = _run_request(command, {"pty": True, **options})
        started = await self.client.request("pty.start", {"session_id": self.id, "request": request})
        return Pty(self, started["job_id"])

    def job(self, job_id: str) -> "Job":
        return Job(self, job_id)

    async def jobs(self) -> list[JobInfo]:
        """Every retained job, oldest first (fetched a page at a time)."""
        jobs: list[JobInfo] = []
        params: dict[str, Any] = {"session_id": self.id, "limit": 1000}
        while True:
            page = await self.client.request("job.list", params)
            jobs.extend(JobInfo.from_json(job) for job in page["jobs"])
            if page.get("next_cursor") is None:
                return jobs
            params["cursor"] = page["next_cursor"]

    async def wait_any(self, job_ids: Sequence[str], timeout: Optional[float] = None) -> Optional[RunResult]:
        """The result of the first of `job_ids` to finish, or `None` at the
        timeout."""
        params: dict[str, Any] = {"session_id": self.id, "job_ids": list(job_ids)}
        if timeout is not None:
            params["timeout_ms"] = int(timeout * 1000)
        waited = await self.client.request("job.wait", params)
        return RunResult.from_json(waited["result"]) if waited.get("result") else None

    async def completions(self, poll: float = 30.0) -> AsyncIterator[RunResult]:
        """Each background job's result once, as they finish (forever; break
        out of the loop to stop)."""
        while True:
            waited = await self.client.request(
                "job.next_completion", {"session_id": self.id, "timeout_ms": int(poll * 1000)})
            if waited.get("result"):
                yield RunResult.from_json(waited["result"])

    async def events(self) -> AsyncIterator[Event]:
        """This session's notifications (opened with `subscribe=True`),
        until the connection closes."""
        if self._events is None:
            raise RuntimeError("open the session with subscribe=True to receive its events")
        while True:
            event = await self._events.get()
            if event is None:
                return
            yield event

    async def close(self) -> None:
        """Ends the session: its shell and everything it started."""
        await self.client.request("session.close", {"session_id": self.id})


class Job:
    """A job of a session (every run is one)."""

    def __init__(self, session: Session, job_id: str) -> None:
        self.session = session
        self.id = job_id

    def _params(self, **extra: Any) -> dict[str, Any]:
        return {"session_id": self.session.id, "job_id": self.id, **extra}

    async def info(self) -> JobInfo:
        return JobInfo.from_json(await self.session.client.request("job.info", self._params()))

    async def output(self, offset: int = 0, max_bytes: Optional[int] = None) -> OutputChunk:
        """Raw output bytes from `offset` (the complete output, also when a
        result showed only its head and tail)."""
        params = self._params(offset=offset)
        if max_bytes is not None:
            params["max_bytes"] = max_bytes
        read = await self.session.client.request("job.output", params)
        return OutputChunk(read["offset"], base64.b64decode(read["data_base64"]), read["total_bytes"], read["closed"])

    async def read_all(self) -> bytes:
        """Every byte the job has printed so far."""
        chunks, offset = [], 0
        while True:
            chunk = await self.output(offset)
            chunks.append(chunk.data)
            offset = chunk.offset + len(chunk.data)
            if not chunk.data or offset >= chunk.total_bytes:
                return b"".join(chunks)

    async def wait(self, timeout: Optional[float] = None) -> Optional[RunResult]:
        """Its result once it finishes, or `None` at the timeout (default
        30 s)."""
        params = self._params()
        if timeout is not None:
            params["timeout_ms"] = int(timeout * 1000)
        waited = await self.session.client.request("job.wait", params)
        return RunResult.from_json(waited["result"]) if waited.get("result") else None

    async def kill(self) -> None:
        """Kills its whole process tree (SIGTERM, then SIGKILL) and returns
        once it has ended."""
        await self.session.client.request("job.kill", self._params())


class Pty(Job):
    """A job on a pseudo-terminal."""

    async def write(self, data: str | bytes) -> None:
        if isinstance(data, bytes):
            params = self._params(data_base64=base64.b64encode(data).decode())
        else:
            params = self._params(text=data)
        await self.session.client.request("pty.write", params)

    async def key(self, key: str) -> None:
        """Presses a named key (`Enter`, `Tab`, `Up`, `F1`, `C-c`, `M-x`, ...)."""
        await self.session.client.request("pty.key", self._params(key=key))

    async def resize(self, cols: int, rows: int) -> dict[str, int]:
        return await self.session.client.request("pty.resize", self._params(cols=cols, rows=rows))

    async def screen(self) -> Screen:
        return Screen.from_json(await self.session.client.request("pty.screen", self._params()))

    async def state(self) -> dict[str, Any]:
        """`{"state": "running" | "awaiting_input" | "exited", "code"?}`."""
        return await self.session.client.request("pty.state", self._params())
