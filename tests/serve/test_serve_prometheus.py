#!/usr/bin/env python3
"""A real Prometheus (Debian's prometheus package) scrapes specchat-cli serve's /metrics: the
target is up and the scraped counters equal the sums of the requests' timings.
Both listen on 127.0.0.1 only. Usage: test_serve_prometheus.py PATH/TO/specchat-cli"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from serve_harness import SKIP, Checks, Server, cli_path, httpx

CLI = cli_path()
checks = Checks()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    prom = shutil.which("prometheus")
    if not prom:
        print("SKIP: prometheus is not installed (scripts/setup installs it)")
        sys.exit(SKIP)
    with Server(CLI, "--parallel", "2") as srv, httpx.Client(base_url=srv.url, timeout=60) as c, \
            tempfile.TemporaryDirectory() as d:
        sums = {"prompt_n": 0, "predicted_n": 0, "draft_n": 0, "draft_n_accepted": 0}
        for p in ("Once upon a time", "The little dog"):
            t = c.post("/v1/completions", json={"prompt": p, "max_tokens": 16}).json()["timings"]
            for k in sums:
                sums[k] += t[k]
        cfg = os.path.join(d, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                    f"  - job_name: specchat\n    static_configs:\n      - targets: ['127.0.0.1:{srv.port}']\n")
        port = free_port()
        proc = subprocess.Popen([prom, f"--config.file={cfg}", f"--storage.tsdb.path={d}/data",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def query(q):
                r = httpx.get(f"http://127.0.0.1:{port}/api/v1/query", params={"query": q}, timeout=5)
                res = r.json()["data"]["result"]
                return float(res[0]["value"][1]) if res else None

            def scraped():
                deadline = time.monotonic() + 60
                got = None
                while time.monotonic() < deadline:
                    try:
                        got = query('specchat:generation_tokens_total{job="specchat"}')
                        if got is not None and query('up{job="specchat"}') == 1:
                            break
                    except (httpx.HTTPError, KeyError, ValueError):
                        pass
                    time.sleep(0.5)
                assert got == sums["predicted_n"], (got, sums)
                assert query("specchat:prompt_tokens_total") == sums["prompt_n"]
                assert query("specchat:draft_tokens_total") == sums["draft_n"]
                assert query("specchat:accepted_tokens_total") == sums["draft_n_accepted"]
                assert query('specchat:requests_total{outcome="ok"}') == 2
                assert query("specchat:time_to_first_token_seconds_count") == 2

            checks.run("Prometheus scrapes /metrics; counters == sums of timings", scraped)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
    checks.finish()


if __name__ == "__main__":
    main()
