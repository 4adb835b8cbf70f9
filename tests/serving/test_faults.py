"""Bad clients and faults against ``serve-env``: malformed messages, killed clients and servers.

Leaks are counted from outside: the server's ``/sessions`` (envs open), its
threads and child processes (``psutil``), Chromium processes, and sandbox
containers through the Docker API (those whose owner label is one of our
servers: other runs on this machine have their own).
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading

import gymnasium as gym
import pytest

pytest.importorskip("openenv")
psutil = pytest.importorskip("psutil")
from websockets.sync.client import connect  # noqa: E402

from feedbackgym.serving.server_process import env_server  # noqa: E402
from tests.serving.client import get, wait_for, ws_url  # noqa: E402

ENV = "feedbackgym/OpsIncident-v1"
CLIENT = """
import json, sys, time
from websockets.sync.client import connect
ws = connect(sys.argv[1])
ws.send(json.dumps({"type": "reset", "data": {"seed": int(sys.argv[2])}})); ws.recv()
for _ in range(3):
    ws.send(json.dumps({"type": "step", "data": {"action": "wait"}})); ws.recv()
print("mid-episode", flush=True)
time.sleep(600)
"""
"""A client process that stops mid-episode and waits to be killed."""


def play_expert_episodes(url, seeds, outcomes):
    """Plays each seed to its end with the expert's actions; appends each outcome."""
    local = gym.make(ENV, obs_mode="text")
    with connect(ws_url(url)) as ws:
        for seed in seeds:
            local.reset(seed=seed)
            ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
            json.loads(ws.recv(timeout=60))
            done = False
            while not done:
                action = local.unwrapped.action_meanings[local.unwrapped.expert_action()]
                local.step(action)
                ws.send(json.dumps({"type": "step", "data": {"action": action}}))
                reply = json.loads(ws.recv(timeout=60))["data"]
                done = reply["done"]
            outcomes.append(reply["observation"]["info"]["outcome"])
    local.close()


MALFORMED = [
    ("{not json", "INVALID_JSON"),
    ('{"type": "step", "data": {"action": "wait"}', "INVALID_JSON"),
    ('{"type": "explode"}', "UNKNOWN_TYPE"),
    ('{"data": {}}', "UNKNOWN_TYPE"),
    ('{"type": "step", "data": {"act": "wait"}}', "VALIDATION_ERROR"),
    ('{"type": "step", "data": {"action": 42}}', "VALIDATION_ERROR"),
    ('{"type": "step"}', "VALIDATION_ERROR"),
    ('{"type": "reset", "data": "seed"}', "VALIDATION_ERROR"),
    ('{"type": "state", "extra": 1}', "VALIDATION_ERROR"),
    ('{"type": "step", "data": {"action": "reboot the world"}}', "VALIDATION_ERROR"),
]


def test_a_thousand_malformed_messages_get_error_codes_while_other_sessions_play_on():
    with env_server(ENV, "--max-sessions", "8") as url:
        outcomes: list[str] = []
        players = [
            threading.Thread(target=play_expert_episodes, args=(url, range(i, 40, 4), outcomes))
            for i in range(4)
        ]
        for player in players:
            player.start()
        codes: dict[str, int] = {}
        rng = random.Random(0)
        with connect(ws_url(url)) as first, connect(ws_url(url)) as second:
            for ws in (first, second):
                ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
                ws.recv(timeout=60)
            for n in range(1000):
                text, expected = rng.choice(MALFORMED)
                ws = (first, second)[n % 2]
                ws.send(text)
                reply = json.loads(ws.recv(timeout=60))
                assert reply["type"] == "error" and reply["data"]["code"] == expected, (text, reply)
                codes[expected] = codes.get(expected, 0) + 1
            # both sessions live on: their episodes go on
            for ws in (first, second):
                ws.send(json.dumps({"type": "step", "data": {"action": "wait"}}))
                assert json.loads(ws.recv(timeout=60))["type"] == "observation"
        for player in players:
            player.join(timeout=600)
        assert sum(codes.values()) == 1000 and len(codes) == 3
        assert len(outcomes) == 40 and set(outcomes) == {"resolved"}
        assert wait_for(lambda: get(url, "/sessions")["open"] == 0, 10)


def test_a_json_value_that_is_not_an_object_ends_only_its_own_session():
    with env_server(ENV, "--max-sessions", "4") as url:
        with connect(ws_url(url)) as bystander, connect(ws_url(url)) as bad:
            for ws in (bystander, bad):
                ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                ws.recv(timeout=60)
            bad.send("[1, 2]")  # OpenEnv 0.10 answers SESSION_ERROR and ends that session
            assert json.loads(bad.recv(timeout=60))["data"]["code"] == "SESSION_ERROR"
            bystander.send(json.dumps({"type": "step", "data": {"action": "wait"}}))
            assert json.loads(bystander.recv(timeout=60))["type"] == "observation"
            assert wait_for(lambda: get(url, "/sessions")["open"] == 1, 10)


class RawSession:
    """A WebSocket session on a bare socket (no library thread holds it), to reset at will."""

    def __init__(self, url):
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        response = b""
        while b"\r\n\r\n" not in response:
            response += self.sock.recv(4096)
        assert response.startswith(b"HTTP/1.1 101"), response
        self.buffer = response.split(b"\r\n\r\n", 1)[1]

    def send(self, message):
        payload, mask = json.dumps(message).encode(), os.urandom(4)
        size = len(payload)
        head = (
            bytes([0x81, 0x80 | size])
            if size < 126
            else bytes([0x81, 0xFE]) + struct.pack("!H", size)
        )
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def recv(self):
        def read(n):
            while len(self.buffer) < n:
                self.buffer += self.sock.recv(65536)
            data, self.buffer = self.buffer[:n], self.buffer[n:]
            return data

        size = read(2)[1] & 0x7F
        if size == 126:
            size = struct.unpack("!H", read(2))[0]
        elif size == 127:
            size = struct.unpack("!Q", read(8))[0]
        return json.loads(read(size))

    def reset_connection(self):
        """Drops the connection with a TCP RST (SO_LINGER 0): no WebSocket close, no FIN."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def test_a_hundred_clients_killed_mid_episode_leave_nothing_behind():
    with env_server(ENV, "--max-sessions", "64", "--idle-timeout", "5") as url:
        server = psutil.Process(get(url, "/sessions")["pid"])
        threads = server.num_threads()
        children = {p.pid for p in server.children(recursive=True)}
        for batch in range(5):  # 50 client processes killed with SIGKILL, 10 at a time
            clients = [
                subprocess.Popen(
                    [sys.executable, "-c", CLIENT, ws_url(url), str(batch * 10 + i)],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for i in range(10)
            ]
            for client in clients:
                assert client.stdout.readline().strip() == "mid-episode"
            assert get(url, "/sessions")["open"] == 10
            for client in clients:
                os.kill(client.pid, signal.SIGKILL)
                client.wait()
                client.stdout.close()
            assert wait_for(lambda: get(url, "/sessions")["open"] == 0, 5)
        for _ in range(5):  # 50 connections dropped with a TCP reset, 10 at a time
            sessions = [RawSession(url) for _ in range(10)]
            for session in sessions:
                session.send({"type": "reset", "data": {"seed": 3}})
                assert session.recv()["type"] == "observation"
                session.send({"type": "step", "data": {"action": "wait"}})
                assert session.recv()["type"] == "observation"
            assert get(url, "/sessions")["open"] == 10
            for session in sessions:
                session.reset_connection()
            assert wait_for(lambda: get(url, "/sessions")["open"] == 0, 5)
        assert get(url, "/sessions")["started"] == 100
        assert wait_for(lambda: server.num_threads() <= threads, 10), (threads, server.threads())
        assert {p.pid for p in server.children(recursive=True)} == children


def chromium(process):
    """The Chromium processes under ``process``."""
    found = []
    for child in process.children(recursive=True):
        try:
            if "chrom" in child.name().lower():
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def gone(pids):
    return not [
        pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
    ]


def killed_client(url, seed):
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, ws_url(url), str(seed)], stdout=subprocess.PIPE, text=True
    )
    assert client.stdout.readline().strip() == "mid-episode"
    return client


def kill(client):
    os.kill(client.pid, signal.SIGKILL)
    client.wait()
    client.stdout.close()


@pytest.mark.web
@pytest.mark.timeout(600)
def test_a_web_env_closes_its_chromium_for_killed_reset_and_silent_clients_and_a_killed_server():
    web = "feedbackgym/WebForm-v0"
    with env_server(web, "--max-sessions", "4", "--idle-timeout", "3") as url:
        server = psutil.Process(get(url, "/sessions")["pid"])
        assert chromium(server) == []
        client = killed_client(url, 0)  # (its "wait" steps may be refused: still mid-episode)
        dropped = RawSession(url)
        dropped.send({"type": "reset", "data": {"seed": 1}})
        assert dropped.recv()["type"] == "observation"
        silent = connect(ws_url(url))
        silent.send(json.dumps({"type": "reset", "data": {"seed": 2}}))
        assert json.loads(silent.recv(timeout=120))["type"] == "observation"
        browsers = {p.pid for p in chromium(server)}
        assert browsers and get(url, "/sessions")["open"] == 3
        kill(client)
        dropped.reset_connection()
        # the silent one: closed by the idle timeout (3 s, checked every 5 s)
        assert wait_for(lambda: get(url, "/sessions")["open"] == 0 and gone(browsers), 30)
        silent.close()
        last = connect(ws_url(url))
        last.send(json.dumps({"type": "reset", "data": {"seed": 3}}))
        assert json.loads(last.recv(timeout=120))["type"] == "observation"
        browsers = {p.pid for p in chromium(server)}
        assert browsers
        server.kill()  # SIGKILL: no close() runs; the browser must not outlive its server
        assert wait_for(lambda: gone(browsers), 30), [
            psutil.Process(p).cmdline()[:2] for p in browsers if psutil.pid_exists(p)
        ]
        last.close()


def sandbox_containers(pids):
    """The sandbox containers whose owner (the label's ``host:pid``) is one of ``pids``."""
    import docker

    client = docker.from_env()
    try:
        listed = client.containers.list(all=True, filters={"label": "feedbackgym.sandbox"})
        owners = {str(pid) for pid in pids}
        return [c for c in listed if c.labels["feedbackgym.sandbox"].rpartition(":")[2] in owners]
    finally:
        client.close()


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_a_code_env_gives_back_its_container_and_a_restarted_server_removes_a_killed_ones(
    monkeypatch,
):
    pytest.importorskip("docker")
    monkeypatch.setenv("FEEDBACKGYM_SANDBOX", "docker")
    code = "feedbackgym/CodeFix-v0"
    servers = []
    with env_server(code, "--max-sessions", "4", "--idle-timeout", "3") as url:
        servers.append(get(url, "/sessions")["pid"])
        for wave in range(2):  # the second wave reuses the first's containers: none leaked
            client = killed_client(url, wave)
            dropped = RawSession(url)
            dropped.send({"type": "reset", "data": {"seed": 10 + wave}})
            assert dropped.recv()["type"] == "observation"
            assert len(sandbox_containers(servers)) == 2
            kill(client)
            dropped.reset_connection()
            assert wait_for(lambda: get(url, "/sessions")["open"] == 0, 20)
        assert len(sandbox_containers(servers)) == 2  # kept warm for the next sessions
    assert sandbox_containers(servers) == []  # the server stopped: every container removed
    with env_server(code, "--idle-timeout", "3") as url:
        servers.append(get(url, "/sessions")["pid"])
        with connect(ws_url(url)) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            assert json.loads(ws.recv(timeout=120))["type"] == "observation"
            assert len(sandbox_containers(servers)) == 1
            psutil.Process(servers[-1]).kill()  # SIGKILL: its container is an orphan now
    assert len(sandbox_containers(servers)) == 1
    with env_server(code) as url:  # a restart removes the dead server's container
        servers.append(get(url, "/sessions")["pid"])
        with connect(ws_url(url)) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            assert json.loads(ws.recv(timeout=120))["type"] == "observation"
            assert [c.labels["feedbackgym.sandbox"] for c in sandbox_containers(servers)] == [
                c.labels["feedbackgym.sandbox"] for c in sandbox_containers(servers[-1:])
            ]
    assert sandbox_containers(servers) == []
