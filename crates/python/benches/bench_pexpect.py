"""The Python client's warm `true` against pexpect driving a warm bash (one
`sendline` and one `expect` of a sentinel per command), in the same run.

Usage: bench_pexpect.py [--samples N] [--json]
Prints p50/p99 in microseconds and the ratio (client / pexpect without its
default 50 ms `delaybeforesend`; pexpect with it is shown too). Point
`SHELLVISOR_BIN` at a release build to measure what users get.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import pexpect

import shellvisor


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pexpect_samples(n: int, tuned: bool) -> list[float]:
    bash = pexpect.spawn("bash", ["--norc", "--noprofile"], encoding="utf-8", echo=False)
    if tuned:
        # pexpect sleeps 50 ms before every send by default (what SWE-ReX's
        # LocalRuntime keeps); without it, the pipe and bash are the floor.
        bash.delaybeforesend = None
    sentinel = "__SV_BENCH__"
    bash.sendline(f"PS1=''; PS2=''; stty -echo")
    bash.sendline(f"echo {sentinel}")
    bash.expect(sentinel)
    samples = []
    for i in range(n + 20):
        started = time.perf_counter()
        bash.sendline(f"true; echo {sentinel}{i}")
        bash.expect(f"{sentinel}{i}")
        if i >= 20:
            samples.append((time.perf_counter() - started) * 1e6)
    bash.close(force=True)
    return samples


async def client_samples(n: int) -> list[float]:
    async with shellvisor.Client() as sv:
        session = await sv.session("bench")
        samples = []
        for i in range(n + 20):
            started = time.perf_counter()
            result = await session.run("true")
            if i >= 20:
                samples.append((time.perf_counter() - started) * 1e6)
            assert result.exit_code == 0
        return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # Interleave the two, twice, so that machine noise hits both.
    client, pexp, default = [], [], []
    for _ in range(2):
        pexp += pexpect_samples(args.samples // 2, tuned=True)
        client += asyncio.run(client_samples(args.samples // 2))
        default += pexpect_samples(max(10, args.samples // 20), tuned=False)
    figures = {
        "samples": len(client),
        "client_p50_us": round(statistics.median(client)),
        "client_p99_us": round(percentile(client, 0.99)),
        "pexpect_p50_us": round(statistics.median(pexp)),
        "pexpect_p99_us": round(percentile(pexp, 0.99)),
        "pexpect_default_p50_us": round(statistics.median(default)),
    }
    figures["p50_ratio"] = round(figures["client_p50_us"] / figures["pexpect_p50_us"], 2)
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"warm `true`, {figures['samples']} samples each:")
        print(f"  shellvisor Python client  p50 {figures['client_p50_us']:>6} us  p99 {figures['client_p99_us']:>6} us")
        print(f"  pexpect + warm bash       p50 {figures['pexpect_p50_us']:>6} us  p99 {figures['pexpect_p99_us']:>6} us")
        print(f"  pexpect, default 50 ms delaybeforesend  p50 {figures['pexpect_default_p50_us']:>6} us")
        print(f"  client / pexpect without the delay (p50)  {figures['p50_ratio']}x")


if __name__ == "__main__":
    main()
