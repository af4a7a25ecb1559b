"""A small network lab for the tests: Linux network namespaces, one per process under test,
each joined to the root namespace by a veth pair on addresses the lab makes up, and a broker
address (a /32 on the root namespace's loopback) every namespace reaches through its link.

* :meth:`NetnsLab.cut` sets the root end of a member's link down: a silent cut (no FIN, no
  RST; held TCP connections stay open until their own timeouts), :meth:`NetnsLab.heal` sets
  it up again;
* :meth:`NetnsLab.shape` puts a ``tbf`` qdisc (rate, burst, latency) on both ends of a link
  (this kernel has no ``sch_netem``);
* :meth:`NetnsLab.popen` runs a command inside a member's namespace (``ip netns exec``).

Needs root and iproute2 (``ip``, ``tc``); :func:`unavailable` says why not. Everything the lab
made is removed by :meth:`NetnsLab.close` (deleting a namespace deletes its veth pair).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NetnsLab", "Member", "unavailable"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def unavailable() -> str | None:
    """Why the lab cannot run here (None if it can)."""
    if os.geteuid() != 0:
        return "network-namespace tests need root (ip netns add)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"network-namespace tests need iproute2's {tool!r} on PATH"
    return None


@dataclass
class Member:
    """One namespace and its link."""

    name: str
    netns: str
    host_dev: str
    ns_dev: str
    address: str


class NetnsLab:
    """Namespaces and links of one test; the broker listens on :attr:`broker_host`."""

    def __init__(self) -> None:
        self._tag = f"{os.getpid() % 10000:04d}{random.randrange(100):02d}"
        self._net = f"10.{random.randrange(200, 250)}.{random.randrange(0, 256)}"
        self._subnet = 0
        self.members: dict[str, Member] = {}
        self.broker_host = f"{self._net}.1"
        # the lab's addresses are /30s of a random 10.x.y.0/24; the broker has the .1
        _ip("addr", "add", f"{self.broker_host}/32", "dev", "lo")

    def add(self, name: str) -> Member:
        """A namespace for ``name`` linked to the root namespace."""
        index = len(self.members) + 1
        ns = f"skm{self._tag}{index}"
        host_dev, ns_dev = f"skh{self._tag}{index}", f"skn{self._tag}{index}"
        base = 4 * (index + 1)
        host_addr, ns_addr = f"{self._net}.{base + 1}", f"{self._net}.{base + 2}"
        _ip("netns", "add", ns)
        member = Member(name, ns, host_dev, ns_dev, ns_addr)
        self.members[name] = member
        _ip("link", "add", host_dev, "type", "veth", "peer", "name", ns_dev)
        _ip("link", "set", ns_dev, "netns", ns)
        _ip("addr", "add", f"{host_addr}/30", "dev", host_dev)
        _ip("link", "set", host_dev, "up")
        _ip("-n", ns, "addr", "add", f"{ns_addr}/30", "dev", ns_dev)
        _ip("-n", ns, "link", "set", ns_dev, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "route", "add", "default", "via", host_addr)
        return member

    def popen(self, name: str, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        """Run ``argv`` in ``name``'s namespace, stderr to ``log`` (``ip netns exec``
        executes the command in place: the process is the command's)."""
        with open(log, "ab") as err:
            return subprocess.Popen(["ip", "netns", "exec", self.members[name].netns, *argv],
                                    stdout=subprocess.DEVNULL, stderr=err)

    def run(self, name: str, argv: list[str], timeout: float = 30) -> str:
        """Run ``argv`` in ``name``'s namespace; its stdout."""
        result = subprocess.run(["ip", "netns", "exec", self.members[name].netns, *argv],
                                capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"{argv!r} in {name!r} failed: {result.stderr.strip()}")
        return result.stdout

    def scrape(self, name: str, port: int) -> str:
        """The Prometheus page a process of ``name`` serves on its namespace's loopback."""
        code = ("import urllib.request,sys;sys.stdout.write(urllib.request.urlopen("
                f"'http://127.0.0.1:{port}/metrics',timeout=5).read().decode())")
        return self.run(name, [sys.executable, "-c", code])

    def cut(self, name: str) -> None:
        """Silently cut ``name``'s link (the root end goes down)."""
        _ip("link", "set", self.members[name].host_dev, "down")

    def heal(self, name: str) -> None:
        _ip("link", "set", self.members[name].host_dev, "up")

    def shape(self, name: str, *, rate: str, latency: str, burst: str = "32kb") -> None:
        """Limit both directions of ``name``'s link with ``tbf`` (``rate`` e.g. ``"2mbit"``,
        ``latency``: the longest a packet may wait in the queue, e.g. ``"100ms"``)."""
        member = self.members[name]
        tbf = ["root", "tbf", "rate", rate, "burst", burst, "latency", latency]
        for prefix in ([], ["ip", "netns", "exec", member.netns]):
            dev = member.host_dev if not prefix else member.ns_dev
            result = subprocess.run([*prefix, "tc", "qdisc", "replace", "dev", dev, *tbf],
                                    capture_output=True, text=True, timeout=30)
            if result.returncode != 0:
                raise RuntimeError(f"tc tbf on {dev!r} failed: {result.stderr.strip()}")

    def unshape(self, name: str) -> None:
        """Remove the ``tbf`` qdiscs of ``name``'s link."""
        member = self.members[name]
        subprocess.run(["tc", "qdisc", "del", "dev", member.host_dev, "root"],
                       capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "exec", member.netns, "tc", "qdisc", "del", "dev",
                        member.ns_dev, "root"], capture_output=True, timeout=30)

    def close(self) -> None:
        """Remove every namespace, link and address the lab made (never raises)."""
        for member in self.members.values():
            _ip("netns", "del", member.netns, check=False)
            _ip("link", "del", member.host_dev, check=False)
        self.members = {}
        _ip("addr", "del", f"{self.broker_host}/32", "dev", "lo", check=False)
