"""Hostile code, run as agent edits in both backends.

Each snippet replaces the first line of the buggy module (so it runs when the
tests import it) and the suite runs. Every step must end cleanly with a clear
signal in ``info`` (a sandbox flag, or tests erroring because the attempt was
refused), the host must be unaffected (no traffic reached a loopback listener
on the host, a host file and a host process of the sandbox's own uid are
intact, the hostname is unchanged), the env must still run the real suite, and
nothing the snippet started may still run.
"""

import os
import socket
import subprocess
import threading
import time

import pytest

from feedbackgym.envs.code import CodeFixEnv
from feedbackgym.envs.code.actions import REVERT, RUN_ALL, FreeEdit
from feedbackgym.envs.code.sandbox.local import sandbox_uid
from tests.envs.code.conftest import BACKENDS, require_backend

RUN_TIMEOUT = 2.0
"""Seconds a run may take: 1.0 timed out once on an exception snippet under load."""

SNIPPETS = {
    # network: nothing but the sandbox's own loopback exists
    "tcp_to_host_loopback": (
        'import socket; socket.create_connection(("127.0.0.1", {port}), timeout=2)',
        "errors",
    ),
    "udp_to_host_loopback": (
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1); "
        's.connect(("127.0.0.1", {port})); s.send(b"x"); s.recv(1)',
        "errors",
    ),
    "tcp_to_ipv6_loopback": (
        'import socket; socket.create_connection(("::1", {port}), timeout=2)',
        "errors",
    ),
    "find_a_network_interface": (
        'import socket; [n for _, n in socket.if_nameindex() if n != "lo"][0]',
        "errors",
    ),
    "raw_socket": (
        "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
        "errors",
    ),
    "docker_socket": (
        'import socket; socket.socket(socket.AF_UNIX).connect("/var/run/docker.sock")',
        "errors",
    ),
    # host files
    "read_host_file": ("open({canary!r}).read()", "errors"),
    "overwrite_host_file": ('open({canary!r}, "r+").write("pwned")', "errors"),
    "read_shadow": ('open("/etc/shadow").read()', "errors"),
    "append_to_passwd": ('open("/etc/passwd", "a").write("x::0:0::/:/bin/sh")', "errors"),
    "write_into_usr": ('open("/usr/lib/evil.py", "w")', "errors"),
    "list_root_home": ('import os; os.listdir("/root")', "errors"),
    "escape_by_dotdot": ('open("../" * 12 + "root/.bashrc")', "errors"),
    "symlink_out": ('import os; os.symlink("/root", "/work/r"); os.listdir("/work/r")', "errors"),
    "mount_a_tmpfs": (
        "import ctypes; "
        'assert ctypes.CDLL(None).mount(b"x", b"/mnt", b"tmpfs", 0, None) == 0, "mounted"',
        "errors",
    ),
    "fill_the_workdir": (
        "exec(\"f = open('/work/big', 'wb')\\nwhile True: f.write(b'x' * 2**20)\")",
        "errors",
    ),
    "fill_tmp_with_files": (
        'exec("i = 0\\nwhile True:\\n'
        "    open('/tmp/f%d' % i, 'wb').write(b'x' * 2**19); i += 1\")",
        "errors",
    ),
    # resources
    "fork_bomb": (
        'exec("import os\\nwhile True:\\n    try: os.fork()\\n    except OSError: pass")',
        "timeout",
    ),
    "fork_bomb_of_sleeps": (
        'import subprocess; [subprocess.Popen(["sleep", "100"]) for _ in range(500)]',
        "errors leftover_processes",
    ),
    "memory_bomb": ("x = bytearray(2**34)", "memory_error"),
    "memory_creep": ('exec("a = []\\nwhile True: a.append(bytearray(10**7))")', "memory_error"),
    "memory_in_children": (
        'exec("import os, time\\nfor _ in range(6):\\n    if os.fork() == 0:\\n'
        '        b = bytearray(2**27); time.sleep(60)")',
        "leftover_processes killed timeout",
    ),
    "cpu_spin": ('exec("while True: pass")', "timeout"),
    "cpu_spin_in_threads": (
        'exec("import threading\\ndef spin():\\n    while True: pass\\n'
        "ts = [threading.Thread(target=spin) for _ in range(4)]\\n"
        '[t.start() for t in ts]\\n[t.join() for t in ts]")',
        "timeout",
    ),
    "huge_output": ("exec(\"while True: print('x' * 10000)\")", "output_limit"),
    "huge_single_write": ('import sys; sys.stderr.write("y" * 10**7)', "output_limit"),
    "sleep_forever": ("import time; time.sleep(10**6)", "timeout"),
    "ignore_sigterm_and_sleep": (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(10**6)",
        "timeout",
    ),
    "stop_itself": ("import os, signal; os.kill(os.getpid(), signal.SIGSTOP)", "timeout"),
    # other processes
    "kill_every_process": ("import os; os.kill(-1, 9)", "sandbox_lost"),
    "kill_the_parent": ("import os; os.kill(os.getppid(), 9)", "sandbox_lost"),
    "stop_the_parent": ("import os, signal; os.kill(os.getppid(), signal.SIGSTOP)", "sandbox_lost"),
    "kill_every_pid_in_proc": (
        "exec(\"import os\\nfor p in os.listdir('/proc'):\\n"
        "    if p.isdigit() and int(p) != os.getpid():\\n"
        '        try: os.kill(int(p), 9)\\n        except OSError: pass")',
        "sandbox_lost",
    ),
    "kill_itself": ("import os; os.kill(os.getpid(), 9)", "killed"),
    "exit_before_the_tests": ("import os; os._exit(0)", "not_run"),
    # /proc and privilege escapes
    "proc_root_of_init": ('open("/proc/1/root/etc/shadow").read()', "errors"),
    "proc_sysrq_trigger": ('open("/proc/sysrq-trigger", "w").write("h")', "errors"),
    "proc_hostname": ('open("/proc/sys/kernel/hostname", "w").write("pwned")', "errors"),
    "proc_kcore": ('assert open("/proc/kcore", "rb").read(16), "no kernel memory"', "errors"),
    "cgroup_limits": ('open("/sys/fs/cgroup/pids.max", "w").write("max")', "errors"),
    "new_user_namespace": (
        'import ctypes; assert ctypes.CDLL(None).unshare(0x10000000) == 0, "unshared"',
        "errors",
    ),
    "setuid_root": ("import os; os.setuid(0)", "errors"),
    # background processes left behind
    "double_fork_daemon": (
        'exec("import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    if os.fork() == 0:\\n'
        '        time.sleep(300)\\n    os._exit(0)")',
        "leftover_processes",
    ),
    "background_sleep": (
        'import subprocess; subprocess.Popen(["sleep", "300"], start_new_session=True)',
        "leftover_processes",
    ),
    "background_holding_the_pipe": (
        'import subprocess; subprocess.Popen(["sleep", "300"])',
        "leftover_processes",
    ),
    "background_shell_loop": (
        'import subprocess; subprocess.Popen(["sh", "-c", '
        '"while true; do echo x >> /tmp/log; sleep 0.1; done"], '
        "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)",
        "leftover_processes",
    ),
}


class _Host:
    """What must stay untouched: loopback listeners, a file, a process, the hostname."""

    def __init__(self, tmp_path):
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.udp.settimeout(0.2)
        self.tcp.settimeout(0.2)
        self.contacts = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._listen, args=(s,), daemon=True)
            for s in (self.tcp, self.udp)
        ]
        for thread in self._threads:
            thread.start()
        self.canary = tmp_path / "canary.txt"
        self.canary.write_text("canary")
        self.canary.chmod(0o666)
        tmp_path.chmod(0o755)
        uid = sandbox_uid() if os.geteuid() == 0 else None  # the sandbox's own uid
        self.process = subprocess.Popen(["sleep", "600"], user=uid)
        self.hostname = socket.gethostname()

    def _listen(self, sock):
        while not self._stop.is_set():
            try:
                if sock.type == socket.SOCK_STREAM:
                    sock.accept()[0].close()
                else:
                    sock.recv(16)
                self.contacts += 1
            except OSError:
                continue

    def assert_untouched(self):
        assert self.contacts == 0, "traffic reached the host's loopback"
        assert self.canary.read_text() == "canary"
        assert self.process.poll() is None, "a host process was killed"
        assert socket.gethostname() == self.hostname

    def close(self):
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.tcp.close()
        self.udp.close()
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    host = _Host(tmp_path_factory.mktemp("host"))
    yield host
    host.assert_untouched()
    host.close()


@pytest.fixture(scope="module", params=BACKENDS)
def hostile_env(request):
    require_backend(request.param)
    env = CodeFixEnv("easy", "text", sandbox=request.param, run_timeout=RUN_TIMEOUT)
    yield env
    env.close()


def _sandbox_processes(env, host):
    """Processes the sandbox still runs (besides a container's init)."""
    if env.sandbox_kind == "docker":
        import docker

        from feedbackgym.envs.code.sandbox.docker import LABEL

        client = docker.from_env()
        mine = [
            c
            for c in client.containers.list(filters={"label": LABEL})
            if c.labels[LABEL].endswith(f":{os.getpid()}")
        ]
        return [
            p for c in mine for p in c.top()["Processes"] if "sleep infinity" not in " ".join(p)
        ]
    if os.geteuid() != 0:
        return []  # an unprivileged caller runs the sandbox as itself: covered by the pid namespace
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        uid = int(status.split("Uid:")[1].split()[0])
        zombie = "State:\tZ" in status  # dead, waiting for init to reap it
        if uid == sandbox_uid() and not zombie and int(pid) != host.process.pid:
            left.append(pid)
    return left


def _signals(info):
    found = {flag for flag, on in info["sandbox"].items() if on}
    if info["tests"]["fail"] or info["tests"]["error"]:
        found.add("errors")
    if info["tests"]["not_run"]:
        found.add("not_run")
    return found


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_hostile_snippet(hostile_env, host, name):
    code, expected = SNIPPETS[name]
    env = hostile_env
    env.reset(seed=0)
    project = env.state.project
    env.step(FreeEdit(project.bug_file, 1, code.format(port=host.port, canary=str(host.canary))))
    started = time.monotonic()
    _, reward, terminated, truncated, info = env.step(RUN_ALL)
    took = time.monotonic() - started
    assert not terminated and not truncated and not info["infra_error"] and reward == 0.0
    assert _signals(info) & set(expected.split()), (
        name,
        _signals(info),
        env.state.last_output[-600:],
    )
    assert took < RUN_TIMEOUT + 8
    host.assert_untouched()
    env.step(REVERT)
    obs, _, _, _, info = env.step(RUN_ALL)
    assert info["tests"] == {"pass": len(project.tests) - 1, "fail": 1, "error": 0, "not_run": 0}, (
        obs
    )
    assert not any(info["sandbox"].values())
    deadline = time.monotonic() + 5
    while _sandbox_processes(env, host) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sandbox_processes(env, host) == []


def test_there_are_at_least_thirty_snippets():
    assert len(SNIPPETS) >= 30
