#!/usr/bin/env python3
"""1,000 malformed requests against specchat-cli serve: bad JSON, wrong types, huge max_tokens,
negative temperature, prompts over the context, invalid UTF-8, missing fields, unknown routes,
oversized bodies and slow-loris bodies. Each gets a 4xx JSON error in OpenAI's shape, the
server never crashes, and a normal request still works afterwards.
Usage: test_serve_malformed.py PATH/TO/specchat-cli"""
import gzip
import json
import random
import socket
import threading
import time

from serve_harness import Checks, Server, cli_path, httpx, reply_text

CLI = cli_path()
TOTAL = 1000
checks = Checks()
MSG = [{"role": "user", "content": "hi"}]


def json_cases():
    """(path, body bytes) pairs that the JSON parser or the schema must refuse."""
    c = []
    chat, comp = "/v1/chat/completions", "/v1/completions"
    for b in [b"", b"{", b"}", b"[", b"{\"messages\": [", b"not json", b"null", b"[]", b"42", b"\"s\"", b"{,}",
              b"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}],}", b"\x00\x01\x02", b"{'a': 1}"]:
        c.append((chat, b))
        c.append((comp, b))
    wrong = [
        {"messages": "hi"}, {"messages": []}, {"messages": [1]}, {"messages": [{"role": "user"}]},
        {"messages": [{"content": "x"}]}, {"messages": [{"role": "robot", "content": "x"}]},
        {"messages": [{"role": "user", "content": 5}]}, {"messages": [{"role": "user", "content": None}]},
        {"messages": MSG, "max_tokens": "10"}, {"messages": MSG, "max_tokens": -1},
        {"messages": MSG, "max_tokens": 10 ** 12}, {"messages": MSG, "max_tokens": 1e308},
        {"messages": MSG, "max_tokens": 2.5}, {"messages": MSG, "max_tokens": 100000},
        {"messages": MSG, "temperature": -0.1}, {"messages": MSG, "temperature": -100},
        {"messages": MSG, "temperature": "0"}, {"messages": MSG, "temperature": 3},
        {"messages": MSG, "top_p": -1}, {"messages": MSG, "top_p": 0}, {"messages": MSG, "top_k": -5},
        {"messages": MSG, "seed": -1}, {"messages": MSG, "seed": "x"}, {"messages": MSG, "stop": 3},
        {"messages": MSG, "stop": [1]}, {"messages": MSG, "stop": ["a"] * 5}, {"messages": MSG, "stream": "yes"},
        {"messages": MSG, "n": 3}, {"messages": MSG, "draft_k": -1}, {"messages": MSG, "draft_k": 1000},
        {"messages": MSG, "tree": "forest"}, {"messages": MSG, "node_budget": 0}, {"messages": MSG, "drafter": 1},
        {"messages": MSG, "speculative": "on"}, {"messages": MSG, "model": []},
        {}, {"prompt": "x"},
    ]
    for w in wrong:
        c.append((chat, json.dumps(w).encode()))
    for w in [{}, {"prompt": 5}, {"prompt": ""}, {"prompt": ["a", "b"]}, {"prompt": None},
              {"prompt": "x", "max_tokens": 10 ** 9}, {"prompt": "x", "temperature": -1},
              {"messages": MSG}]:
        c.append((comp, json.dumps(w).encode()))
    # prompts over the context (the bundled pair has 1,024 tokens; one token per word at least)
    long_text = " ".join(["word"] * 3000)
    c.append((comp, json.dumps({"prompt": long_text, "max_tokens": 4}).encode()))
    c.append((chat, json.dumps({"messages": [{"role": "user", "content": long_text}]}).encode()))
    # invalid UTF-8 inside JSON strings
    for bad in [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf"]:
        c.append((chat, b'{"messages": [{"role": "user", "content": "a' + bad + b'b"}]}'))
        c.append((comp, b'{"prompt": "a' + bad + b'b"}'))
    return c


def routes():
    """(method, path) pairs that do not exist."""
    return [("GET", "/"), ("GET", "/v1"), ("GET", "/v1/chat/completions"), ("POST", "/v1/models"),
            ("POST", "/health"), ("GET", "/v2/models"), ("PUT", "/v1/completions"), ("DELETE", "/v1/completions"),
            ("GET", "/v1/embeddings"), ("POST", "/v1/embeddings"), ("GET", "/../../etc/passwd"),
            ("GET", "/metrics/x"), ("PATCH", "/v1/chat/completions")]


def check_error(status, body, what):
    assert 400 <= status < 500, f"{what}: HTTP {status} {body[:200]!r}"
    j = json.loads(body)
    assert isinstance(j["error"]["message"], str) and j["error"]["message"], f"{what}: {body[:200]!r}"
    assert "type" in j["error"], what


def raw_request(port, data, read_timeout=15, pause_after=None):
    """Sends raw bytes (optionally stalling after `pause_after` bytes) and returns (status, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    try:
        if pause_after is None:
            s.sendall(data)
        else:
            s.sendall(data[:pause_after])  # then say nothing: the server's read timeout must end it
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            chunks.append(b)
            head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
            if _ and b"content-length" in head.lower():
                n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
                if len(rest) >= n:
                    break
        resp = b"".join(chunks)
        head, _, body = resp.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
        return status, body
    finally:
        s.close()


def main():
    with Server(CLI, "--parallel", "2", "--read-timeout", "1", "--max-body-bytes", "65536") as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as c:
        cases = json_cases()
        counts = {"json": 0, "route": 0, "oversized": 0, "slow": 0}
        rng = random.Random(1234)

        def malformed():
            sent = 0
            # a few raw-socket cases: oversized bodies and slow-loris bodies
            for i in range(6):
                big = b"x" * (70000 + i)
                st, body = raw_request(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                       b"application/json\r\nContent-Length: " + str(len(big)).encode() +
                                       b"\r\nConnection: close\r\n\r\n" + big)
                assert st == 413, (st, body[:200])
                check_error(st, body, "oversized body")
                counts["oversized"] += 1
                sent += 1
            # Regression: a chunked body, or a gzip body that inflates, skipped --max-body-bytes
            # (cpp-httplib checks only Content-Length and the compressed size).
            pad = json.dumps({"prompt": "Once", "max_tokens": 1, "pad": "y" * 100000}).encode()
            chunked = b"".join(b"%x\r\n" % len(pad[k:k + 8192]) + pad[k:k + 8192] + b"\r\n"
                               for k in range(0, len(pad), 8192)) + b"0\r\n\r\n"
            st, body = raw_request(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                   b"application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                                   chunked)
            assert st == 413, ("chunked", st, body[:200])
            check_error(st, body, "oversized chunked body")
            gz = gzip.compress(pad)
            assert len(gz) < 65536
            st, body = raw_request(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                   b"application/json\r\nContent-Encoding: gzip\r\nContent-Length: " +
                                   str(len(gz)).encode() + b"\r\nConnection: close\r\n\r\n" + gz)
            assert st in (413, 415), ("gzip", st, body[:200])
            counts["oversized"] += 2
            sent += 2
            for i in range(4):
                t0 = time.monotonic()
                st, body = raw_request(srv.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                       b"application/json\r\nContent-Length: 500\r\nConnection: close\r\n\r\n"
                                       b"{\"messages\": [", pause_after=80 + i)
                assert time.monotonic() - t0 < 10, "a slow-loris body held the connection"
                check_error(st, body, "slow-loris body")
                counts["slow"] += 1
                sent += 1
            rs = routes()
            # The rest from 4 clients at once (each request alone costs a delayed ACK, ~40 ms: the
            # client writes headers and body separately).
            errors, lock = [], threading.Lock()

            def worker(w):
                nonlocal sent
                local_rng = random.Random(1234 + w)
                with httpx.Client(base_url=srv.url, timeout=30) as cw:
                    for k in range(w, TOTAL - sent0, 4):
                        try:
                            if k % 10 == 0:
                                method, path = rs[(k // 10) % len(rs)]
                                # cpp-httplib does not read the body of a GET/DELETE: one would be
                                # left on the keep-alive connection (the next request reads as garbage).
                                r = cw.request(method, path, content=None if method in ("GET", "DELETE") else b"{}")
                                kind = "route"
                            else:
                                path, body = cases[local_rng.randrange(len(cases))]
                                r = cw.post(path, content=body, headers={"Content-Type": "application/json"})
                                kind = "json"
                            check_error(r.status_code, r.content, f"request {k}")
                        except Exception as e:  # noqa: BLE001
                            with lock:
                                errors.append(repr(e))
                            continue
                        with lock:
                            counts[kind] += 1
                            sent += 1

            sent0 = sent
            threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=240)
            assert not any(t.is_alive() for t in threads), "a client hung"
            assert not errors, errors[:5]
            assert sent == TOTAL, sent
            assert srv.proc.poll() is None, "the server died"
            # A known route asked with the wrong method is 405 with an Allow header; an unknown
            # path is 404 (RFC 9110 §15.5.5/6).
            for method, path, status, allow in [("GET", "/v1/chat/completions", 405, "POST"),
                                                ("POST", "/health", 405, "GET"), ("POST", "/v1/models", 405, "GET"),
                                                ("PUT", "/v1/completions", 405, "POST"),
                                                ("GET", "/v1/embeddings", 404, None), ("GET", "/", 404, None)]:
                r = c.request(method, path, content=None if method == "GET" else b"{}")
                assert r.status_code == status, (method, path, r.status_code, r.text[:200])
                assert r.headers.get("allow") == allow, (method, path, r.headers.get("allow"))
                check_error(r.status_code, r.content, f"{method} {path}")
            print(f"  {sent} malformed requests: {counts}")

        def still_works():
            r = c.post("/v1/chat/completions", json={"messages": MSG, "max_tokens": 8})
            assert r.status_code == 200, r.text
            assert reply_text(r.json(), True) is not None
            m = c.get("/metrics").text
            assert 'specchat:requests_total{outcome="invalid"}' in m

        def slow_headers_do_not_starve():
            # 40 clients that send their request headers a byte every 0.5 s (each byte within the
            # 1 s read timeout, so none is dropped) held all 26 connection threads of a fixed
            # pool: /health and real requests got no answer while they kept going (fresh-user
            # check). The pool now grows past them.
            stop = threading.Event()
            socks = []

            def dribble(sock):
                data = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
                for b in data:
                    if stop.is_set():
                        return
                    try:
                        sock.sendall(bytes([b]))
                    except OSError:
                        return
                    stop.wait(0.5)

            threads = []
            try:
                for _ in range(40):
                    sk = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                    socks.append(sk)
                    t = threading.Thread(target=dribble, args=(sk,), daemon=True)
                    t.start()
                    threads.append(t)
                time.sleep(1.5)  # every slow connection has been accepted and holds its thread
                for _ in range(3):
                    t0 = time.monotonic()
                    r = httpx.get(srv.url + "/health", timeout=10)
                    assert r.status_code == 200, r.status_code
                    assert time.monotonic() - t0 < 3, f"/health took {time.monotonic() - t0:.1f} s"
                r = httpx.post(srv.url + "/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 4},
                               timeout=10)
                assert r.status_code == 200, r.text
            finally:
                stop.set()
                for sk in socks:
                    sk.close()
                for t in threads:
                    t.join(timeout=5)

        checks.run("40 clients sending their headers slowly do not starve /health or requests", slow_headers_do_not_starve)
        checks.run(f"{TOTAL} malformed requests each get a 4xx JSON error", malformed)
        checks.run("a normal request still works", still_works)

        def post_without_length():
            # Regression: a POST with neither Content-Length nor Transfer-Encoding has no body
            # (RFC 9112 section 6.3), but the server read until the read timeout before its 400.
            for path in (b"/v1/chat/completions", b"/v1/completions"):
                t0 = time.monotonic()
                st, body = raw_request(srv.port, b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                                       b"Content-Type: application/json\r\n\r\n")
                elapsed = time.monotonic() - t0
                assert st == 400, (path, st, body[:200])
                check_error(st, body, "POST without a body")
                assert elapsed < 0.8, f"answered after {elapsed:.2f} s (the read timeout is 1 s)"

        checks.run("a POST without Content-Length is answered at once", post_without_length)

        def bad_content_length():
            # Regression: "12abc" was read as 12, "-5" answered 413 and conflicting values were
            # taken as the first: a proxy framing the request otherwise could smuggle one in.
            body = b'{"prompt": "Once", "max_tokens": 1}'
            for lengths in ([b"12abc"], [b"-5"], [str(len(body)).encode(), str(len(body) + 1).encode()],
                            [b"0x10"], [b"99999999999999999999"]):
                head = b"".join(b"Content-Length: " + v + b"\r\n" for v in lengths)
                st, resp = raw_request(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                       b"application/json\r\n" + head + b"\r\n" + body)
                assert st == 400, (lengths, st, resp[:200])
                check_error(st, resp, f"Content-Length {lengths}")
                assert json.loads(resp)["error"]["code"] == "invalid_content_length", resp[:200]
            # Two equal values frame the body the same way: accepted.
            n = str(len(body)).encode()
            st, resp = raw_request(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                   b"application/json\r\nContent-Length: " + n + b"\r\nContent-Length: " + n +
                                   b"\r\nConnection: close\r\n\r\n" + body)
            assert st == 200, (st, resp[:200])

        checks.run("an invalid or conflicting Content-Length is a 400 that closes the connection", bad_content_length)
        checks.run("a normal request still works after them", still_works)
    checks.finish()


if __name__ == "__main__":
    main()
