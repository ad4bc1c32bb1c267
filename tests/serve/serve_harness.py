"""Shared helpers of the server checks (tests/serve/test_serve_*.py).

Starts `specchat-cli serve --port 0` on loopback (the kernel picks a free port; the start-up line
"listening on http://HOST:PORT" names it), collects its log, and stops it. Every wait is bounded.
A check that cannot run (python3-httpx missing) exits 77, which ctest reports as skipped.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

try:
    import httpx  # Debian: python3-httpx (scripts/setup)
except ImportError:  # pragma: no cover - reported as a skip
    print("SKIP: python3-httpx is not installed (scripts/setup installs it)")
    sys.exit(77)

SKIP = 77


def cli_path():
    if len(sys.argv) < 2:
        print("usage: test_serve_*.py PATH/TO/specchat-cli")
        sys.exit(2)
    return sys.argv[1]


class Server:
    """A running `specchat-cli serve`. Use as a context manager."""

    def __init__(self, cli, *args, env=None, start_timeout=120):
        self.cli = cli
        self.args = ["serve", "--port", "0", *args]
        full_env = dict(os.environ)
        full_env.pop("SPECCHAT_API_KEY", None)
        if env:
            full_env.update(env)
        self.proc = subprocess.Popen([cli, *self.args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=full_env)
        self.lines = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port = None
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            with self._lock:
                for line in self.lines:
                    m = re.search(r"listening on http://([^: ]+|\[[^\]]+\]):(\d+)", line)
                    if m:
                        self.port = int(m.group(2))
            if self.port or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not self.port:
            self.stop()
            raise RuntimeError("the server did not start:\n" + self.log())
        self.url = f"http://127.0.0.1:{self.port}"

    def _read(self):
        for raw in self.proc.stderr:
            with self._lock:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def log(self):
        with self._lock:
            return "\n".join(self.lines)

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self, timeout=20):
        """SIGTERM, then SIGKILL after `timeout` s. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def stream_events(client, path, body, headers=None):
    """POSTs a streaming request; returns (status, [parsed data events], saw_done)."""
    events, done = [], False
    with client.stream("POST", path, json=body, headers=headers or {}) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, [r.json()], False
        assert r.headers["content-type"].startswith("text/event-stream"), r.headers
        for line in r.iter_lines():
            line = line.rstrip("\r\n")
            if not line:
                continue
            assert line.startswith("data: "), line
            payload = line[len("data: "):]
            if payload == "[DONE]":
                done = True
                continue
            assert not done, "an event after [DONE]"
            events.append(json.loads(payload))
    return 200, events, done


def streamed_text(events, chat):
    out = []
    for e in events:
        for c in e.get("choices", []):
            if chat:
                out.append(c.get("delta", {}).get("content") or "")
            else:
                out.append(c.get("text") or "")
    return "".join(out)


def reply_text(j, chat):
    c = j["choices"][0]
    return c["message"]["content"] if chat else c["text"]


def generate_cli(cli, *args, timeout=120):
    """`specchat-cli generate --json ...`; returns its JSON object."""
    p = subprocess.run([cli, "generate", "--json", *args], capture_output=True, timeout=timeout)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return json.loads(p.stdout)


def metric(text, name):
    """The value of the sample `name` (with its labels) in a Prometheus text exposition."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no sample {name} in /metrics")


class Checks:
    """Counts named checks and prints 'N passed, N failed' at the end."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def run(self, name, fn):
        t0 = time.monotonic()
        try:
            fn()
            self.passed += 1
            print(f"PASS {name} ({time.monotonic() - t0:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
            self.failed += 1
            import traceback
            traceback.print_exc()
            print(f"FAIL {name}: {e}", flush=True)

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(1 if self.failed else 0)
