"""What the machine is (spec) and how busy it is (metrics), read from the OS.

Spec: `{os, arch, cpus, memory}` (memory in bytes). Metrics: `{load1, load5, load15, memUsed,
memFree}` (bytes). Linux reads `/proc/meminfo`; elsewhere memory figures are omitted.
"""

from __future__ import annotations

import os
import platform
import socket


def _meminfo() -> dict[str, int]:
    values: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                name, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    values[name] = int(parts[0]) * 1024  # kB → bytes
    except OSError:
        pass
    return values


def hostname() -> str:
    """Return this machine's host name (the re-link key, with the owner)."""
    return socket.gethostname()


def spec() -> dict:
    """Return this machine's spec for registration."""
    memory = _meminfo().get("MemTotal", 0)
    result = {"os": platform.system().lower(), "arch": platform.machine(), "cpus": os.cpu_count() or 0}
    if memory:
        result["memory"] = memory
    return result


def metrics() -> dict:
    """Return this machine's current load and memory use (a heartbeat's body)."""
    try:
        load1, load5, load15 = os.getloadavg()
    except OSError:
        load1 = load5 = load15 = 0.0
    info = _meminfo()
    result = {"load1": load1, "load5": load5, "load15": load15}
    if info.get("MemTotal"):
        free = info.get("MemAvailable", info.get("MemFree", 0))
        result.update({"memFree": free, "memUsed": max(info["MemTotal"] - free, 0)})
    return result
