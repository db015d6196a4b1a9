"""A SWE-ReX runtime on shellvisor: `ShellvisorRuntime` implements
`swerex.runtime.abstract.AbstractRuntime`, so SWE-agent and other SWE-ReX
users switch with one line:

    runtime = ShellvisorRuntime()          # instead of LocalRuntime()

Differences from `LocalRuntime` (pexpect on one bash): a timed-out command is
killed with its whole process tree before `CommandTimeoutError` is raised
(the session stays usable, no interrupt needed); output is byte-exact (no PS1
scraping, no control characters stripped); commands are never re-split or
rewritten; `execute` runs under the runtime's containment too, its `env`
added to the environment rather than replacing it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import shlex
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Optional

from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (
    AbstractRuntime,
    BashAction,
    BashInterruptAction,
    BashObservation,
    CloseBashSessionResponse,
    CloseResponse,
    Command,
    CommandResponse,
    CreateBashSessionResponse,
    IsAliveResponse,
    ReadFileRequest,
    ReadFileResponse,
    UploadRequest,
    UploadResponse,
    WriteFileRequest,
    WriteFileResponse,
)

from .client import Client, Pty, Session
from .errors import ShellvisorError
from .types import Backgrounded, RunResult

# `timeout=None` means no timeout in SWE-ReX; shellvisor's longest deadline.
_NO_TIMEOUT_SECS = 3600
# An interactive program's reaction is awaited this long when the action has
# no timeout.
_INTERACTIVE_WAIT_SECS = 30.0


def _deadline(timeout: Optional[float]) -> int:
    """shellvisor deadlines are whole seconds, at least one."""
    if timeout is None:
        return _NO_TIMEOUT_SECS
    return max(1, min(_NO_TIMEOUT_SECS, math.ceil(timeout)))


class _BashSession:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.pty: Optional[Pty] = None
        self.pty_read = 0


class ShellvisorRuntime(AbstractRuntime):
    """SWE-ReX's runtime interface on a shellvisor `Client` (started on
    first use: `shellvisor serve` as a child, or `socket=PATH`)."""

    def __init__(self, *, client: Optional[Client] = None, logger: Optional[logging.Logger] = None, **client_options: Any):
        self._client = client
        self._client_options = client_options
        self._owns_client = client is None
        self._sessions: dict[str, _BashSession] = {}
        self._prefix = f"swerex-{uuid.uuid4().hex[:8]}"
        self.logger = logger or logging.getLogger("shellvisor.swerex")

    async def _connected(self) -> Client:
        if self._client is None:
            self._client = Client(**self._client_options)
            await self._client.start()
        return self._client

    def _bash(self, name: str) -> _BashSession:
        if name not in self._sessions:
            raise SessionDoesNotExistError(f"session {name!r} does not exist")
        return self._sessions[name]

    async def is_alive(self, *, timeout: Optional[float] = None) -> IsAliveResponse:
        try:
            client = await self._connected()
            await asyncio.wait_for(client.info(), timeout)
        except Exception as err:  # noqa: BLE001 - any failure means not alive
            return IsAliveResponse(is_alive=False, message=str(err))
        return IsAliveResponse(is_alive=True)

    async def create_session(self, request: Any) -> CreateBashSessionResponse:
        if request.session in self._sessions:
            raise SessionExistsError(f"session {request.session} already exists")
        client = await self._connected()
        session = await client.session(f"{self._prefix}-{request.session}-{uuid.uuid4().hex[:6]}")
        self._sessions[request.session] = _BashSession(session)
        output = ""
        if request.startup_source:
            sourced = " && ".join(f"source {shlex.quote(path)}" for path in request.startup_source)
            result = await session.run(sourced, timeout=_deadline(request.startup_timeout))
            if isinstance(result, RunResult):
                output = result.output
                if result.timed_out:
                    raise CommandTimeoutError(f"timeout after {request.startup_timeout} seconds while sourcing the startup files")
        return CreateBashSessionResponse(output=output)

    async def run_in_session(self, action: Any) -> BashObservation:
        bash = self._bash(action.session)
        if isinstance(action, BashInterruptAction):
            return await self._interrupt(bash)
        if action.is_interactive_command or action.is_interactive_quit:
            return await self._interactive(bash, action)
        await _check_syntax(action.command)
        try:
            outcome = await bash.session.run(action.command, timeout=_deadline(action.timeout))
        except ShellvisorError as err:
            raise NonZeroExitCodeError(f"{action.command!r} was refused: {err} ({err.code})") from err
        assert isinstance(outcome, RunResult), outcome
        if outcome.timed_out:
            raise CommandTimeoutError(
                f"timeout after {action.timeout} seconds while running command {action.command!r} "
                f"(killed with its process tree)")
        output = await _whole_output(bash.session, outcome)
        exit_code = None if action.check == "ignore" else outcome.exit_code
        if action.check == "raise" and exit_code != 0:
            message = f"Command {action.command!r} failed with exit code {exit_code}. Here is the output:\n{output!r}"
            if action.error_msg:
                message = f"{action.error_msg}: {message}"
            raise NonZeroExitCodeError(message)
        return BashObservation(output=output, exit_code=exit_code)

    async def _interrupt(self, bash: _BashSession) -> BashObservation:
        """Kills what the session runs (its foreground command, from another
        task, and its terminal program), as Ctrl-C and `kill -9 %1` would."""
        killed = []
        for job in await bash.session.jobs():
            if job.state == "running":
                await bash.session.job(job.job_id).kill()
                killed.append(job.label)
        bash.pty = None
        return BashObservation(output="\n".join(f"killed: {label}" for label in killed), exit_code=0)

    async def _interactive(self, bash: _BashSession, action: BashAction) -> BashObservation:
        """An interactive program on a terminal: the first command starts
        it, later ones are typed into it; the answer is the new output once
        an `expect` string shows, it waits for input, or it exits."""
        if bash.pty is None or (await bash.pty.state())["state"] == "exited":
            bash.pty = await bash.session.start_pty(action.command)
            bash.pty_read = 0
        else:
            await bash.pty.write(action.command + "\n")
        wait = action.timeout if action.timeout is not None else _INTERACTIVE_WAIT_SECS
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        seen = b""
        matched = ""
        while True:
            chunk = await bash.pty.output(bash.pty_read)
            seen += chunk.data
            bash.pty_read = chunk.offset + len(chunk.data)
            text = seen.decode(errors="backslashreplace")
            matched = next((e for e in action.expect if e in text), "")
            state = (await bash.pty.state())["state"]
            if matched or state == "exited" or (state == "awaiting_input" and not action.expect and seen):
                break
            if loop.time() >= deadline:
                if action.is_interactive_quit:
                    break
                raise CommandTimeoutError(f"timeout after {wait} seconds while running command {action.command!r}")
            await asyncio.sleep(0.05)
        if action.is_interactive_quit:
            if (await bash.pty.state())["state"] != "exited":
                await bash.pty.kill()
            bash.pty = None
        output = seen.decode(errors="backslashreplace").replace("\r\n", "\n")
        if output.lstrip().startswith(action.command):
            output = output.lstrip()[len(action.command):]
        return BashObservation(output=output.strip(), exit_code=0, expect_string=matched)

    async def close_session(self, request: Any) -> CloseBashSessionResponse:
        bash = self._bash(request.session)
        del self._sessions[request.session]
        await bash.session.close()
        return CloseBashSessionResponse()

    async def execute(self, command: Command) -> CommandResponse:
        client = await self._connected()
        text = command.command if isinstance(command.command, str) else shlex.join(command.command)
        if isinstance(command.command, list) and command.shell:
            text = command.command[0]
        session = await client.session(f"{self._prefix}-exec-{uuid.uuid4().hex}")
        folder = tempfile.mkdtemp(prefix="shellvisor-exec-")
        stderr_path = os.path.join(folder, "stderr")
        try:
            shell_text = f"( {text}\n) 2>&1" if command.merge_output_streams else f"( {text}\n) 2>{shlex.quote(stderr_path)}"
            outcome = await session.run(shell_text, timeout=_deadline(command.timeout), cwd=command.cwd, env=command.env)
            assert isinstance(outcome, RunResult), outcome
            if outcome.timed_out:
                raise CommandTimeoutError(f"Timeout ({command.timeout}s) exceeded while running command")
            stdout = await _whole_output(session, outcome)
            stderr = ""
            if not command.merge_output_streams and os.path.exists(stderr_path):
                stderr = Path(stderr_path).read_bytes().decode(errors="backslashreplace")
        finally:
            await session.close()
            shutil.rmtree(folder, ignore_errors=True)
        response = CommandResponse(stdout=stdout, stderr=stderr, exit_code=outcome.exit_code)
        if command.check and outcome.exit_code != 0:
            message = (f"Command {command.command!r} failed with exit code {outcome.exit_code}. "
                       f"Stdout:\n{stdout!r}\nStderr:\n{stderr!r}")
            if command.error_msg:
                message = f"{command.error_msg}: {message}"
            raise NonZeroExitCodeError(message)
        return response

    async def read_file(self, request: ReadFileRequest) -> ReadFileResponse:
        content = Path(request.path).read_text(encoding=request.encoding, errors=request.errors)
        return ReadFileResponse(content=content)

    async def write_file(self, request: WriteFileRequest) -> WriteFileResponse:
        Path(request.path).parent.mkdir(parents=True, exist_ok=True)
        Path(request.path).write_text(request.content)
        return WriteFileResponse()

    async def upload(self, request: UploadRequest) -> UploadResponse:
        if Path(request.source_path).is_dir():
            shutil.copytree(request.source_path, request.target_path)
        else:
            shutil.copy(request.source_path, request.target_path)
        return UploadResponse()

    async def close(self) -> CloseResponse:
        for bash in list(self._sessions.values()):
            try:
                await bash.session.close()
            except ShellvisorError:
                pass
        self._sessions.clear()
        if self._owns_client and self._client is not None:
            await self._client.close()
            self._client = None
        return CloseResponse()


async def _whole_output(session: Session, result: RunResult) -> str:
    """The run's complete output (a long one is shown as head and tail; the
    artifact has every byte)."""
    raw = result.output.encode(errors="surrogateescape")
    if result.truncation and result.truncation.get("truncated"):
        raw = await session.job(result.job_id).read_all()
    return raw.decode(errors="backslashreplace")


async def _check_syntax(command: str) -> None:
    """SWE-ReX refuses text bash cannot parse (`bash -n`) before running it."""
    process = await asyncio.create_subprocess_exec(
        "bash", "-n", "-c", command,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, stderr = await process.communicate()
    if process.returncode != 0:
        raise BashIncorrectSyntaxError(
            f"Error ({process.returncode}) while checking bash command \n{command!r}\n---- Stderr ----\n"
            f"{stderr.decode(errors='backslashreplace')}",
            extra_info={"bash_stdout": "", "bash_stderr": stderr.decode(errors="backslashreplace")})
