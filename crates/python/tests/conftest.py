"""Shared helpers: the binary under test (`SHELLVISOR_BIN`, else the one the
wheel installed) and process scans that find what a test's server started."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

# The process scan the protocol tests use (tests/python/procs.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "python"))
from procs import processes_with_env  # noqa: E402


def wait_until_gone(needle: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while processes_with_env(needle):
        assert time.monotonic() < deadline, processes_with_env(needle)
        time.sleep(0.05)


@pytest.fixture
def marker() -> str:
    """An environment entry (NAME=value) that every process of one server carries."""
    return f"SHELLVISOR_PY_TEST={uuid.uuid4().hex}"


def marker_env(marker: str) -> dict[str, str]:
    name, value = marker.split("=", 1)
    return {name: value}
