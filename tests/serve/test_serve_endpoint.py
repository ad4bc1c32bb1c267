#!/usr/bin/env python3
"""`specchat-cli generate --endpoint URL`: the CLI as a client of an OpenAI-compatible server.
Against specchat-cli serve: the text equals local generation and the speculative statistics
come from the server's timings; a key is sent from SPECCHAT_API_KEY; errors are clear. Against a
stand-in vLLM-style server (no timings; spec-decode counters on /metrics): the statistics come
from the counters' change. All on 127.0.0.1. Usage: test_serve_endpoint.py PATH/TO/specchat-cli"""
import http.server
import json
import os
import subprocess
import threading

from serve_harness import Checks, Server, cli_path, generate_cli

CLI = cli_path()
CHAT = "Tell me a short story about a dog."
checks = Checks()


def run_cli(*args, env=None, timeout=120):
    e = dict(os.environ)
    e.pop("SPECCHAT_API_KEY", None)
    e.update(env or {})
    return subprocess.run([CLI, "generate", *args], capture_output=True, timeout=timeout, env=e)


class FakeVllm(http.server.BaseHTTPRequestHandler):
    """Streams a fixed reply without timings and counts drafted/accepted tokens on /metrics."""
    drafted = 100
    accepted = 60

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path != "/metrics":
            self.send_error(404)
            return
        body = ("# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
                f'vllm:spec_decode_num_draft_tokens_total{{model_name="m"}} {FakeVllm.drafted}.0\n'
                "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
                f'vllm:spec_decode_num_accepted_tokens_total{{model_name="m"}} {FakeVllm.accepted}.0\n').encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        req = json.loads(self.rfile.read(n))
        assert req["stream"] is True and req["messages"][-1]["content"] == CHAT
        FakeVllm.drafted += 12
        FakeVllm.accepted += 9
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in ["Hello", " from", " vLLM"]:
            ev = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(ev)}\r\n\r\n".encode())
        ev = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}
        self.wfile.write(f"data: {json.dumps(ev)}\r\n\r\ndata: [DONE]\r\n\r\n".encode())
        self.wfile.flush()
        self.close_connection = True


def main():
    def against_serve():
        local = generate_cli(CLI, "--chat", CHAT, "-n", "24")
        with Server(CLI, "--parallel", "1", "--api-key", "k123") as srv:
            p = run_cli("--endpoint", srv.url + "/v1", "--chat", CHAT, "-n", "24", "--json",
                        env={"SPECCHAT_API_KEY": "k123"})
            assert p.returncode == 0, p.stderr.decode()
            j = json.loads(p.stdout)
            assert j["text"] == local["text"], (j["text"], local["text"])
            assert j["n_generated"] == local["n_generated"]
            assert j["spec_stats_source"] == "timings" and j["drafted"] > 0
            assert j["timings"]["draft_n"] == j["drafted"]
            # streamed to stdout as text, then a statistics line
            p = run_cli("--endpoint", srv.url, "--prompt", "Once upon a time", "-n", "16", "--api-key", "k123")
            assert p.returncode == 0, p.stderr.decode()
            local_p = generate_cli(CLI, "--prompt", "Once upon a time", "-n", "16")
            out = p.stdout.decode()
            assert out.startswith(local_p["text"]), (out, local_p["text"])
            assert "drafted" in out and "server timings" in out
            # drafting options go to the server (regression, 2026-12-04: they were ignored and the
            # server drafted its default chain of 4: 12 drafts for 8 tokens); k = 1 drafts at
            # most one token a step
            p = run_cli("--endpoint", srv.url, "--chat", CHAT, "-n", "8", "--json", "-k", "1",
                        env={"SPECCHAT_API_KEY": "k123"})
            assert p.returncode == 0, p.stderr.decode()
            j = json.loads(p.stdout)
            assert 0 < j["drafted"] <= j["n_generated"], j
            # without --tree the server's own default shape applies, so a node budget alone is sent,
            # not judged against this CLI's default chain (regression, 2026-12-04: refused)
            p = run_cli("--endpoint", srv.url, "--chat", CHAT, "-n", "4", "--node-budget", "6",
                        env={"SPECCHAT_API_KEY": "k123"})
            assert p.returncode == 0, p.stderr.decode()
            # options of the local engine are refused, not ignored
            for extra in (["--model", "/nonexistent.gguf"], ["--ctx", "64"], ["--tree", "auto"],
                          ["--draft", "/nonexistent.gguf"], ["--chat-template", "llama2"]):
                p = run_cli("--endpoint", srv.url, "--chat", CHAT, "-n", "4", *extra,
                            env={"SPECCHAT_API_KEY": "k123"})
                assert p.returncode == 2 and b"does not apply to --endpoint" in p.stderr, (extra, p.stderr)
            # without the key: exit 1 and the server's message
            p = run_cli("--endpoint", srv.url, "--chat", CHAT, "-n", "4")
            assert p.returncode == 1 and b"401" in p.stderr, p.stderr
        # nobody listening (the server above is gone)
        p = run_cli("--endpoint", srv.url, "--chat", CHAT, "-n", "4")
        assert p.returncode == 1 and b"cannot reach" in p.stderr, p.stderr
        assert b"could not connect" in p.stderr and b"server running" in p.stderr, p.stderr
        p = run_cli("--endpoint", "ftp://x", "--chat", CHAT)
        assert p.returncode == 1 and b"http" in p.stderr, p.stderr

    def against_vllm_style():
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeVllm)
        t = threading.Thread(target=httpd.serve_forever, daemon=True)
        t.start()
        try:
            url = f"http://127.0.0.1:{httpd.server_address[1]}"
            p = run_cli("--endpoint", url, "--chat", CHAT, "-n", "8", "--json", timeout=60)
            assert p.returncode == 0, p.stderr.decode()
            j = json.loads(p.stdout)
            assert j["text"] == "Hello from vLLM"
            assert j["n_generated"] == 3 and j["n_prompt"] == 7
            assert j["spec_stats_source"] == "vllm_metrics"
            assert j["drafted"] == 12 and j["accepted"] == 9, j
        finally:
            httpd.shutdown()
            t.join(timeout=10)

    def compare_two_endpoints():
        # baseline on one server, speculative on another: identical text, drafts only on the second
        with Server(CLI, "--parallel", "1") as a, Server(CLI, "--parallel", "1") as b:
            p = subprocess.run([CLI, "compare", "--baseline-endpoint", a.url, "--endpoint", b.url, "--chat", CHAT,
                                "-n", "24", "--json"], capture_output=True, timeout=120)
            assert p.returncode == 0, p.stderr.decode()
            j = json.loads(p.stdout)
            assert j["identical"] is True, j
            assert j["baseline"]["drafted"] == 0 and j["speculative"]["drafted"] > 0
            assert j["baseline"]["endpoint"] == a.url and j["speculative"]["endpoint"] == b.url
            assert j["speedup_decode"] > 0 and j["total_time_ratio"] > 0
            assert "request chatcmpl-1" in a.log() and "request chatcmpl-1" in b.log()
            p = subprocess.run([CLI, "compare", "--endpoint", b.url, "--prompt", "Once upon a time", "-n", "16"],
                               capture_output=True, timeout=120)
            assert p.returncode == 0 and b"identical text" in p.stdout, p.stdout

    checks.run("generate --endpoint against specchat serve == local generate", against_serve)
    checks.run("compare --baseline-endpoint A --endpoint B", compare_two_endpoints)
    checks.run("generate --endpoint against a vLLM-style server: stats from /metrics", against_vllm_style)
    checks.finish()


if __name__ == "__main__":
    main()
