"""Is the machine quiet? The benchmarks' check before each timed arm.

A timing taken while another process computes measures the scheduler, not the code: on 2 cores a
second CPU-bound process halves what torch's threads get, and hurts a side whose threads spin
while they wait (the Trainer's, OpenMP's default) far more than one whose threads sleep. So each
arm first waits until no other process has used more than `BUSY_SHARE` of a core over a one-second
sample (this process and its children excepted), and records what it found: the load average and
the busy processes, if any. Load averages lag by a minute, so they are reported, not waited for.

    from quiet import wait_until_quiet
    state = wait_until_quiet()          # {"quiet": True, "load": 0.4, "busy": []}
"""

from __future__ import annotations

import os
import time
from pathlib import Path

BUSY_SHARE = 0.2  # of one core, over the sample: more than an editor or a shell uses
SAMPLE_SECONDS = 1.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_ticks() -> dict[int, tuple[int, str]]:
    """Every process's user + system CPU ticks and its command, from /proc."""
    ticks = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue  # ended meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks[int(entry.name)] = (int(fields[11]) + int(fields[12]), command or stat.split()[1])
    return ticks


def _own_family() -> set[int]:
    """This process, its ancestors (the shell, flock) and its descendants: not 'other' work."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    family, pid = set(), os.getpid()
    while pid > 1:
        family.add(pid)
        pid = parents.get(pid, 1)
    grew = True
    while grew:
        children = {child for child, parent in parents.items() if parent in family}
        grew = bool(children - family)
        family |= children
    return family


def busy_processes(seconds: float = SAMPLE_SECONDS) -> list[str]:
    """Other processes that used more than BUSY_SHARE of a core over `seconds`."""
    before = _cpu_ticks()
    time.sleep(seconds)
    after = _cpu_ticks()
    family = _own_family()
    busy = []
    for pid, (ticks, command) in after.items():
        if pid in family or pid not in before:
            continue
        share = (ticks - before[pid][0]) / CLOCK_TICKS / seconds
        if share > BUSY_SHARE:
            busy.append(f"{pid} {command[:60]} ({share:.0%} of a core)")
    return busy


def machine_state() -> dict:
    """The 1-minute load average and the other busy processes, now."""
    busy = busy_processes()
    return {"quiet": not busy, "load": round(os.getloadavg()[0], 2), "busy": busy}


def wait_until_quiet(max_wait: float = 300.0) -> dict:
    """`machine_state` once no other process is busy, or after `max_wait` seconds (then
    `quiet` is False and the figures that follow are a loaded machine's)."""
    deadline = time.monotonic() + max_wait
    state = machine_state()
    while not state["quiet"] and time.monotonic() < deadline:
        state = machine_state()
    return state
