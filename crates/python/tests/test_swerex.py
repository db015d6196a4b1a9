"""SWE-ReX-style cases for `ShellvisorRuntime` (SWE-ReX's own request and
response models, its exceptions, its calling patterns)."""

from __future__ import annotations

import asyncio
import os
import tempfile

import pytest
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
    CloseBashSessionRequest,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    UploadRequest,
    WriteFileRequest,
)

from shellvisor.swerex import ShellvisorRuntime
from conftest import marker_env, processes_with_env, wait_until_gone


def with_runtime(marker, body):
    async def scenario():
        runtime = ShellvisorRuntime(env=marker_env(marker))
        assert isinstance(runtime, AbstractRuntime)
        try:
            await runtime.create_session(CreateBashSessionRequest())
            await body(runtime)
        finally:
            await runtime.close()
    asyncio.run(asyncio.wait_for(scenario(), 120))
    wait_until_gone(marker)


def test_byte_exact_output_multi_line_commands_and_heredocs(marker):
    async def body(rt):
        obs = await rt.run_in_session(BashAction(command="printf 'a  b\\n\\tc\\n\\n'"))
        assert obs.output == "a  b\n\tc\n\n" and obs.exit_code == 0, obs
        obs = await rt.run_in_session(BashAction(command="x=1\nif [ $x = 1 ]; then\n  echo one\nfi\necho two"))
        assert obs.output == "one\ntwo\n", obs
        obs = await rt.run_in_session(BashAction(command="cat <<'EOF'\n$NOT_EXPANDED\n  kept\nEOF"))
        assert obs.output == "$NOT_EXPANDED\n  kept\n", obs
        await rt.run_in_session(BashAction(command="cd /tmp && export SWE=rex"))
        obs = await rt.run_in_session(BashAction(command="echo $SWE $PWD"))
        assert obs.output == "rex /tmp\n"
        big = await rt.run_in_session(BashAction(command="seq 1 100000"))
        assert big.output == "".join(f"{i}\n" for i in range(1, 100001)), "a long output is whole"
    with_runtime(marker, body)


def test_check_modes_and_syntax_errors(marker):
    async def body(rt):
        with pytest.raises(NonZeroExitCodeError):
            await rt.run_in_session(BashAction(command="false"))
        obs = await rt.run_in_session(BashAction(command="echo x; exit 4", check="silent"))
        assert obs.exit_code == 4 and obs.output == "x\n"
        obs = await rt.run_in_session(BashAction(command="false", check="ignore"))
        assert obs.exit_code is None
        with pytest.raises(BashIncorrectSyntaxError):
            await rt.run_in_session(BashAction(command="if then fi ("))
        assert (await rt.run_in_session(BashAction(command="echo fine"))).output == "fine\n"
    with_runtime(marker, body)


def test_a_timeout_kills_and_the_session_goes_on(marker):
    async def body(rt):
        with pytest.raises(CommandTimeoutError):
            await rt.run_in_session(BashAction(command="sleep 60 & sleep 60", timeout=1))
        assert not any("sleep 60" in cmd for _, cmd in processes_with_env(marker))
        await rt.run_in_session(BashAction(command="cd / && export AFTER=1"))
        assert (await rt.run_in_session(BashAction(command="echo $AFTER $PWD"))).output == "1 /\n"
    with_runtime(marker, body)


def test_interrupting_a_running_command(marker):
    async def body(rt):
        running = asyncio.create_task(rt.run_in_session(BashAction(command="sleep 60; echo never", check="silent")))
        while not any("sleep 60" in cmd for _, cmd in processes_with_env(marker)):
            await asyncio.sleep(0.05)
        interrupted = await rt.run_in_session(BashInterruptAction())
        assert interrupted.exit_code == 0 and "sleep 60" in interrupted.output, interrupted
        obs = await asyncio.wait_for(running, 20)
        assert "never" not in obs.output and obs.exit_code != 0, obs
        assert (await rt.run_in_session(BashAction(command="echo next"))).output == "next\n"
    with_runtime(marker, body)


def test_an_interactive_program(marker):
    async def body(rt):
        started = await rt.run_in_session(BashAction(command="python3 -q", is_interactive_command=True, expect=[">>> "],
                                                     timeout=20))
        assert started.expect_string == ">>> "
        answered = await rt.run_in_session(BashAction(command="print(6 * 7)", is_interactive_command=True,
                                                      expect=[">>> "], timeout=20))
        assert "42" in answered.output, answered
        await rt.run_in_session(BashAction(command="exit()", is_interactive_quit=True, timeout=20))
        assert (await rt.run_in_session(BashAction(command="echo back"))).output == "back\n"
    with_runtime(marker, body)


def test_sessions_in_parallel_and_their_lifecycle(marker):
    async def body(rt):
        names = [f"s{i}" for i in range(6)]
        for name in names:
            await rt.create_session(CreateBashSessionRequest(session=name))
        with pytest.raises(SessionExistsError):
            await rt.create_session(CreateBashSessionRequest(session="s0"))
        await asyncio.gather(*(rt.run_in_session(BashAction(command=f"export ME={n}", session=n)) for n in names))
        outputs = await asyncio.gather(*(rt.run_in_session(BashAction(command="sleep 0.3; echo $ME", session=n))
                                         for n in names))
        assert [o.output for o in outputs] == [f"{n}\n" for n in names]
        await rt.close_session(CloseBashSessionRequest(session="s0"))
        with pytest.raises(SessionDoesNotExistError):
            await rt.run_in_session(BashAction(command="true", session="s0"))
        assert (await rt.is_alive()).is_alive
    with_runtime(marker, body)


def test_startup_sources(marker, tmp_path):
    rc = tmp_path / "rc.sh"
    rc.write_text("export FROM_RC=yes\nalias ll='echo aliased'\n")

    async def body(rt):
        await rt.create_session(CreateBashSessionRequest(session="rc", startup_source=[str(rc)]))
        assert (await rt.run_in_session(BashAction(command="echo $FROM_RC", session="rc"))).output == "yes\n"
    with_runtime(marker, body)


def test_execute_files_and_upload(marker, tmp_path):
    async def body(rt):
        done = await rt.execute(Command(command=["sh", "-c", "echo out; echo err >&2; exit 5"]))
        assert (done.stdout, done.stderr, done.exit_code) == ("out\n", "err\n", 5), done
        merged = await rt.execute(Command(command="echo a; echo b >&2", shell=True, merge_output_streams=True))
        assert merged.stdout == "a\nb\n" and merged.exit_code == 0
        assert (await rt.execute(Command(command="pwd", shell=True, cwd=str(tmp_path)))).stdout == f"{tmp_path}\n"
        assert (await rt.execute(Command(command="echo $V", shell=True, env={"V": "given"}))).stdout == "given\n"
        with pytest.raises(NonZeroExitCodeError):
            await rt.execute(Command(command="false", shell=True, check=True))
        with pytest.raises(CommandTimeoutError):
            await rt.execute(Command(command="sleep 30", shell=True, timeout=1))
        target = tmp_path / "sub" / "f.txt"
        await rt.write_file(WriteFileRequest(path=str(target), content="héllo\n"))
        assert (await rt.read_file(ReadFileRequest(path=str(target)))).content == "héllo\n"
        source = tmp_path / "tree"
        (source / "deep").mkdir(parents=True)
        (source / "deep" / "x").write_text("x")
        await rt.upload(UploadRequest(source_path=str(source), target_path=str(tmp_path / "copy")))
        assert (tmp_path / "copy" / "deep" / "x").read_text() == "x"
    with_runtime(marker, body)
