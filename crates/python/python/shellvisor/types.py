"""Typed results of the shellvisor protocol (`shellvisor schema` names each
field; `tests/test_types.py` checks these classes against it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Union


def _build(cls, data: dict[str, Any]):
    """`cls` from a JSON object: known fields taken, absent ones `None`."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{name: data.get(name) for name in names})


@dataclass(frozen=True)
class Screen:
    """A terminal's screen as a human would see it."""

    lines: list[str]
    cursor_row: int
    cursor_col: int
    size: dict[str, int]
    alternate_screen: bool

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Screen":
        return _build(cls, data)


@dataclass(frozen=True)
class RunResult:
    """A finished run: its output (head and tail when large; the complete
    bytes are in `truncation["artifact"]` and readable with `Job.output`),
    its exit code and what happened (timeout, kill, restart)."""

    job_id: str
    output: str
    text: str
    exit_code: Optional[int]
    is_error: bool
    timed_out: bool
    timeout_reason: Optional[str]
    killed: bool
    shell_restarted: bool
    cwd: Optional[str]
    wall_time_ms: int
    notices: list[str]
    timeout: Optional[dict[str, Any]]
    truncation: Optional[dict[str, Any]]
    limits: Optional[dict[str, Any]]
    screen: Optional[Screen]

    kind = "completed"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunResult":
        result = _build(cls, data)
        if isinstance(result.screen, dict):
            result = dataclasses.replace(result, screen=Screen.from_json(result.screen))
        return result


@dataclass(frozen=True)
class Backgrounded:
    """A run answered as a background job (`reason`: `requested`, `timer`,
    `awaiting_input` or `ready`); follow it with `Session.job(job_id)`."""

    job_id: str
    reason: str
    label: str
    preview: str
    text: str
    output_bytes: int
    cwd: Optional[str]
    timeout: Optional[dict[str, Any]]

    kind = "backgrounded"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Backgrounded":
        return _build(cls, data)


RunOutcome = Union[RunResult, Backgrounded]


def outcome_from_json(data: dict[str, Any]) -> RunOutcome:
    if data.get("kind") == "backgrounded":
        return Backgrounded.from_json(data)
    return RunResult.from_json(data)


@dataclass(frozen=True)
class JobInfo:
    """A job's state (`running`, `completed`, `timed_out`, `killed`, ...)."""

    job_id: str
    label: str
    state: str
    background: bool
    started_at_ms: int
    wall_time_ms: int
    output_bytes: int
    exit_code: Optional[int]
    pty_state: Optional[dict[str, Any]]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JobInfo":
        return _build(cls, data)


@dataclass(frozen=True)
class OutputChunk:
    """Raw output bytes of a job from `offset`; `closed` once it has ended
    and everything was read."""

    offset: int
    data: bytes
    total_bytes: int
    closed: bool


@dataclass(frozen=True)
class RuntimeInfo:
    """What the runtime is and runs."""

    version: str
    running_jobs: int
    live_process_groups: int
    containment: dict[str, Any]
    artifacts_dir: str
    artifacts_in_memory: bool
    warnings: list[str]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RuntimeInfo":
        return _build(cls, data)


@dataclass(frozen=True)
class Event:
    """A notification of a session: `method` is `output`, `job.started`,
    `job.finished`, `job.ready`, `output.suppressed`, `pty.state` or
    `lagged`; `params` as the protocol sends it (output has `data` decoded)."""

    method: str
    params: dict[str, Any]
