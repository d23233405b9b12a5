"""A three-host test cluster made of Linux network namespaces (SPEC §8 multi-host; issue 11).

Each host is a network namespace with its own hostname (a persistent UTS namespace), joined to
the others by a veth pair on one bridge, with an address from 203.0.113.0/24 (TEST-NET-3, a
documentation range: checked unused on this machine first). The namespaces have no default route
and the bridge has no address, so nothing reaches or leaves the machine through them. Open MPI's
daemons are started inside the hosts by tests/cluster/rsh_agent.sh; ranks talk TCP over the
bridge. Everything is torn down by `down()` (also after a failure: use the context manager).
"""

import os
import shutil
import signal
import subprocess
import time

SUBNET = "203.0.113.0/24"
HERE = os.path.dirname(os.path.abspath(__file__))


class Unavailable(Exception):
    """Network namespaces cannot be made here (not root, no CAP_NET_ADMIN, no ip/nsenter)."""


def _ip(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip"] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def subnet_in_use():
    """True when an interface or route of the machine already uses the test subnet."""
    addrs = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True)
    routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True,
                            text=True)
    return " 203.0.113." in addrs.stdout or "203.0.113." in routes.stdout


class Cluster:
    """hosts[i] = {"name": "h1", "addr": "203.0.113.11", "ns": ..., "uts": ...}."""

    def __init__(self, workdir, nhosts=3):
        self.prefix = f"sm{os.getpid() % 100000}"
        self.workdir = workdir
        self.bridge = f"{self.prefix}br"
        self.hosts = []
        for i in range(1, nhosts + 1):
            self.hosts.append({"name": f"h{i}", "addr": f"203.0.113.{10 + i}",
                               "ns": f"{self.prefix}h{i}",
                               "uts": f"/run/{self.prefix}-uts-h{i}",
                               "veth": (f"{self.prefix}v{i}a", f"{self.prefix}v{i}b")})
        self.map_file = os.path.join(workdir, "hosts.map")
        self.hostfile = os.path.join(workdir, "hostfile")

    # -- set-up and tear-down -------------------------------------------------------------------
    def up(self, slots=2):
        if os.geteuid() != 0:
            raise Unavailable("network namespaces need root")
        for tool in ("ip", "nsenter", "unshare"):
            if shutil.which(tool) is None:
                raise Unavailable(f"{tool} not found")
        if subnet_in_use():
            raise Unavailable(f"{SUBNET} is already used on this machine")
        os.makedirs(self.workdir, exist_ok=True)
        r = subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Unavailable(f"cannot create a bridge: {r.stderr.strip()}")
        try:
            _ip("link", "set", self.bridge, "up")
            for h in self.hosts:
                self._host_up(h)
        except (subprocess.CalledProcessError, OSError) as e:
            self.down()
            msg = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
            raise Unavailable(f"cannot create the test hosts: {msg}") from e
        with open(self.map_file, "w") as f:
            for h in self.hosts:
                f.write(f"{h['addr']} {h['ns']} {h['uts']}\n")
        with open(self.hostfile, "w") as f:
            for h in self.hosts:
                f.write(f"{h['addr']} slots={slots}\n")

    def _host_up(self, h):
        a, b = h["veth"]
        subprocess.run(["ip", "netns", "add", h["ns"]], check=True, capture_output=True, text=True)
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        _ip("link", "set", b, "netns", h["ns"])
        _ip("link", "set", a, "master", self.bridge, "up")
        _ip("addr", "add", f"{h['addr']}/24", "dev", b, ns=h["ns"])
        _ip("link", "set", b, "up", ns=h["ns"])
        _ip("link", "set", "lo", "up", ns=h["ns"])
        open(h["uts"], "w").close()
        subprocess.run(["unshare", f"--uts={h['uts']}", "hostname", h["name"]], check=True,
                       capture_output=True, text=True)

    def down(self):
        """Kill every process left in a host, delete the namespaces, the bridge and the UTS
        files. Safe to call twice and after a partial up()."""
        for h in self.hosts:
            self.kill_host(h, wait=2.0)
            subprocess.run(["ip", "netns", "del", h["ns"]], capture_output=True)
            if os.path.exists(h["uts"]):
                subprocess.run(["umount", h["uts"]], capture_output=True)
                try:
                    os.unlink(h["uts"])
                except OSError:
                    pass
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def __enter__(self):
        self.up()
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    # -- processes ------------------------------------------------------------------------------
    def pids(self, h):
        r = subprocess.run(["ip", "netns", "pids", h["ns"]], capture_output=True, text=True)
        return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []

    def pids_left(self, within=10.0):
        """{host name: pids} of the hosts that still run a process once they had `within` seconds
        to exit (Open MPI's daemons and sanitized ranks may still be in their exit handlers when
        mpirun returns); {} as soon as none is left."""
        deadline = time.monotonic() + within
        while True:
            left = {h["name"]: pids for h in self.hosts for pids in [self.pids(h)] if pids}
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def kill_host(self, h, wait=5.0):
        """SIGKILL every process of host h (as if the node died); waits until none is left."""
        deadline = time.monotonic() + wait
        while True:
            pids = self.pids(h)
            if not pids:
                return True
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def enter(self, h):
        """The command prefix that runs a program inside host h."""
        return ["nsenter", f"--net=/run/netns/{h['ns']}", f"--uts={h['uts']}", "--"]

    def mpirun_args(self, mpiexec, nranks):
        """mpirun on host 1 with daemons on every host: TCP only, on the test subnet only,
        lost daemons detected by OOB keepalives within seconds."""
        return self.enter(self.hosts[0]) + [
            mpiexec, "--hostfile", self.hostfile, "-np", str(nranks),
            "--mca", "plm_rsh_agent", os.path.join(HERE, "rsh_agent.sh"),
            "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", SUBNET,
            "--mca", "oob_tcp_if_include", SUBNET,
            "--mca", "oob_tcp_keepalive_time", "1",
            "--mca", "oob_tcp_keepalive_intvl", "1",
            "--mca", "oob_tcp_keepalive_probes", "3",
        ]

    def env(self, base):
        env = dict(base)
        env.update({"SM_CLUSTER_MAP": self.map_file, "SM_CLUSTER_DIR": self.workdir,
                    "TMPDIR": os.path.join(self.workdir, self.hosts[0]["ns"])})
        os.makedirs(env["TMPDIR"], exist_ok=True)
        return env
