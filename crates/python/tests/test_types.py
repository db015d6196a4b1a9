"""The typed results name exactly the fields `shellvisor schema` gives."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import shellvisor
from shellvisor import JobInfo, RunResult, Backgrounded, RuntimeInfo, Screen


def schema() -> dict:
    out = subprocess.run([shellvisor.find_binary(), "schema"], capture_output=True, check=True, timeout=30)
    return json.loads(out.stdout)


def fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_dataclasses_match_the_schema():
    methods = schema()["methods"]
    run_defs = methods["run"]["result"]["$defs"]
    assert fields(RunResult) == set(run_defs["RunResult"]["properties"])
    assert fields(Backgrounded) == set(run_defs["BackgroundedRun"]["properties"]) | {"reason"}
    assert fields(Screen) == set(methods["pty.screen"]["result"]["properties"])
    assert fields(JobInfo) == set(methods["job.info"]["result"]["properties"])
    assert fields(RuntimeInfo) == set(methods["runtime.info"]["result"]["properties"])
    assert {"offset", "total_bytes", "closed"} <= set(methods["job.output"]["result"]["properties"])
    # Every request field of `run` is a keyword of Session.run.
    request = set(methods["run"]["params"]["$defs"]["RunRequest"]["properties"])
    import inspect
    keywords = set(inspect.signature(shellvisor.Session.run).parameters) - {"self"}
    assert request - {"async", "command"} <= keywords and "background" in keywords, request - keywords
