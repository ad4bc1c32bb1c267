#!/usr/bin/env python3
"""Security and configuration: a non-loopback bind without an API key refuses to start; with a key
(flag or SPECCHAT_API_KEY) requests without it or with a wrong one get 401, /health still
answers; prompt text reaches the log only with --log-content; a config file is read and flags
override it. All traffic goes to 127.0.0.1 (the server binds 0.0.0.0, which includes loopback).
Usage: test_serve_auth.py PATH/TO/specchat-cli"""
import json
import os
import subprocess
import tempfile

from serve_harness import Checks, Server, cli_path, httpx, reply_text

CLI = cli_path()
KEY = "test-key-0123456789"
SECRET = "purple elephant secret"
checks = Checks()


def main():
    def refuses_without_key():
        env = dict(os.environ)
        env.pop("SPECCHAT_API_KEY", None)
        p = subprocess.run([CLI, "serve", "--host", "0.0.0.0", "--port", "0"], capture_output=True, timeout=60, env=env)
        assert p.returncode == 2, (p.returncode, p.stderr)
        assert b"API key" in p.stderr, p.stderr

    def key_required():
        with Server(CLI, "--host", "0.0.0.0", "--parallel", "1", env={"SPECCHAT_API_KEY": KEY}) as srv, \
                httpx.Client(base_url=srv.url, timeout=60) as c:
            body = {"messages": [{"role": "user", "content": SECRET}], "max_tokens": 8}
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY},
                            {"Authorization": "Bearer " + KEY + "x"}, {"Authorization": "Basic " + KEY}):
                for method, path in (("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("GET", "/metrics"),
                                     ("GET", "/nope")):
                    r = c.request(method, path, json=body if method == "POST" else None, headers=headers)
                    assert r.status_code == 401, (headers, path, r.status_code)
                    assert r.json()["error"]["type"] == "authentication_error"
            r = c.get("/health")
            assert r.status_code == 200 and r.json()["status"] == "ok"
            ok = {"Authorization": "Bearer " + KEY}
            r = c.post("/v1/chat/completions", json=body, headers=ok)
            assert r.status_code == 200, r.text
            reply = reply_text(r.json(), True)
            assert c.get("/v1/models", headers=ok).status_code == 200
            # The scheme is case-insensitive (RFC 7235 section 2.1; a regression refused "bearer").
            for scheme in ("bearer ", "BEARER ", "Bearer   "):  # and 1*SP before the key
                assert c.get("/v1/models", headers={"Authorization": scheme + KEY}).status_code == 200, scheme
            log = srv.log()
            assert "auth=on" in log
            assert SECRET not in log, "prompt text in the log without --log-content"
            assert KEY not in log, "the API key in the log"
            if len(reply.strip()) > 3:
                assert json.dumps(reply)[1:-1] not in log, "reply text in the log without --log-content"

    def log_content_and_config():
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "serve.json")
            with open(cfg, "w") as f:
                json.dump({"parallel": 1, "queue": 1, "default_max_tokens": 5, "port": 1, "model_name": "from-file"}, f)
            # --port 0 (the harness) overrides the file's port 1
            with Server(CLI, "--config", cfg, "--log-content", "--model-name", "from-flag") as srv, \
                    httpx.Client(base_url=srv.url, timeout=60) as c:
                r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": SECRET}]})
                assert r.status_code == 200, r.text
                assert r.json()["usage"]["completion_tokens"] <= 5  # default_max_tokens from the file
                assert r.json()["model"] == "from-flag"
                assert c.get("/v1/models").json()["data"][0]["id"] == "from-flag"
                assert "parallel=1 queue=1" in srv.log()
                assert SECRET in srv.log(), "--log-content did not log the prompt"
            with open(cfg, "w") as f:
                f.write('{"paralel": 2}')
            p = subprocess.run([CLI, "serve", "--config", cfg], capture_output=True, timeout=60)
            assert p.returncode == 2 and b"paralel" in p.stderr, p.stderr
            with open(cfg, "w") as f:
                f.write('{"api_key": "x"}')
            p = subprocess.run([CLI, "serve", "--config", cfg], capture_output=True, timeout=60)
            assert p.returncode == 2 and b"SPECCHAT_API_KEY" in p.stderr, p.stderr

    checks.run("a non-loopback bind without a key refuses to start", refuses_without_key)
    checks.run("with a key: 401 without it, /health open, no text or key in the log", key_required)
    checks.run("--log-content logs text; the config file is read and flags override it", log_content_and_config)
    checks.finish()


if __name__ == "__main__":
    main()
