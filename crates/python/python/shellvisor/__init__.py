"""shellvisor: persistent bash sessions for AI agents, from Python.

`Client` (asyncio) and `SyncClient` talk to `shellvisor serve`, which the
wheel installs; `shellvisor.swerex.ShellvisorRuntime` is a SWE-ReX runtime.
"""

from ._binary import find_binary
from .client import Client, Job, Pty, Session
from .errors import ConnectionClosed, ShellvisorError
from .sync import SyncClient
from .types import Backgrounded, Event, JobInfo, OutputChunk, RunOutcome, RunResult, RuntimeInfo, Screen

__all__ = [
    "Backgrounded",
    "Client",
    "ConnectionClosed",
    "Event",
    "Job",
    "JobInfo",
    "OutputChunk",
    "Pty",
    "RunOutcome",
    "RunResult",
    "RuntimeInfo",
    "Screen",
    "Session",
    "ShellvisorError",
    "SyncClient",
    "find_binary",
]
