#!/usr/bin/python3
"""A small HTTP/1.1 file server with scripted faults, for shardmill's HTTP fault-injection tests.

Serves a directory (GET and HEAD, single byte ranges `bytes=a-b`, `bytes=a-`, `bytes=-n`, 206 /
416 like nginx, keep-alive) from a threaded stdlib server bound to 127.0.0.1, and injects faults
into the responses for paths that match a rule. Rules are JSON objects:

    {"path": "v3/arr.zarr/c/0/1/1",   # fnmatch pattern on the URL path without the leading '/'
     "fault": "status",               # see below
     "times": 2,                      # how many matching requests get the fault (then normal)
     "status": 503,                   # for "status"
     "retry_after": 1,                # for "status": adds a Retry-After header (seconds)
     "seconds": 3.0,                  # for "stall": how long to stall (capped at 30 s)
     "skip": 1}                       # let this many matching requests through first

Faults:
    status       answer `status` with a small error body (500, 503, 429, 403, 404, ...)
    reset        send the headers and half the body, then reset the connection (RST)
    truncate     announce the full Content-Length, send half the body, then close (FIN)
    bad_range    answer with 206 whose Content-Range (and body) are shifted by one byte: later
                 than asked, or earlier when the range ends at the object's end (suffixes);
                 a whole-object GET gets a 206 for bytes 1..end
    short_range  answer with 206 for one byte less than asked (Content-Range and body agree,
                 the total after '/' is the true size): a span loses its last byte, a suffix
                 its first
    stall        send the headers and the first bytes, stall `seconds`, then send the rest
    ignore_range answer a ranged GET with 200 and the whole object (a server without ranges)
    chunked      the normal response, but with Transfer-Encoding: chunked (no Content-Length)
    chunked_truncate  chunked, half the body, then close without the terminating chunk
    redirect     answer 302 with `Location: <location>` (the rule's "location"; "{url}" in it is
                 replaced by the server's own http://127.0.0.1:port)
    length       announce the rule's "length" (default 2^62) as Content-Length, send the real
                 body, then close (FIN): a response declaring far more than it has

Every fault is bounded: by `times` (default 1; at most 10000) and by the server's lifetime
(`--max-lifetime`, default 120 s, after which the process exits by itself).

Control (not logged, not subject to faults):
    POST /__control/faults   body: a JSON list of rules; replaces the rules and their counts
    POST /__control/reset    clears the rules and the request log
    GET  /__control/log      the request log: a JSON list of {"conn", "method", "path", "range",
                             "status", "fault", "t", "sent"} (t: seconds since start, when the
                             request line was read; sent: body bytes of a 2xx response written to
                             the socket, after transfer decoding, i.e. what a client counts)
    POST /__control/quit     stops the server

Python: `with FaultServer(root) as fs: fs.set_faults([...]); fs.url; fs.log()` runs the server
as a child process (so shardmill's requests never compete with the test for the GIL) and stops it
by pid, also at exit.

CLI: fault_server.py --root DIR --port-file F [--faults RULES.json] [--max-lifetime S]
"""

import argparse
import atexit
import fnmatch
import http.server
import json
import os
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
import urllib.request

MAX_TIMES = 10000
MAX_STALL_S = 30.0


class State:
    def __init__(self, root, rules):
        self.root = os.path.abspath(root)
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.log = []
        self.conn_seq = 0
        self.set_rules(rules)

    def set_rules(self, rules):
        with self.lock:
            clean = []
            for r in rules:
                r = dict(r)
                r.setdefault("times", 1)
                r["times"] = max(0, min(int(r["times"]), MAX_TIMES))
                r["left"] = r["times"]
                r["skip"] = max(0, min(int(r.get("skip", 0)), MAX_TIMES))
                if "seconds" in r:
                    r["seconds"] = min(float(r["seconds"]), MAX_STALL_S)
                clean.append(r)
            self.rules = clean

    def take_fault(self, path):
        """The first matching rule with faults left (its count decremented), or None."""
        with self.lock:
            for r in self.rules:
                if r["left"] > 0 and fnmatch.fnmatchcase(path, r["path"]):
                    if r["skip"] > 0:
                        r["skip"] -= 1
                        return None
                    r["left"] -= 1
                    return r
        return None

    def new_conn(self):
        with self.lock:
            self.conn_seq += 1
            return self.conn_seq

    def record(self, entry):
        with self.lock:
            self.log.append(entry)


def parse_range(header, size):
    """(first, last) inclusive, None for no/unsupported Range, or 'unsatisfiable'."""
    if not header or not header.startswith("bytes="):
        return None
    spec = header[len("bytes="):].strip()
    if "," in spec:
        return None  # multipart ranges: not supported, serve the whole object like nginx may
    a, sep, b = spec.partition("-")
    if not sep:
        return None
    try:
        if a == "":
            n = int(b)
            if n == 0:
                return "unsatisfiable"
            return (max(0, size - n), size - 1) if size > 0 else "unsatisfiable"
        first = int(a)
        last = int(b) if b != "" else size - 1
    except ValueError:
        return None
    if last < first:
        return "unsatisfiable"
    if first >= size:
        return "unsatisfiable"
    return (first, min(last, size - 1))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms stalls
    server_version = "shardmill-fault-server"
    sys_version = ""

    def setup(self):
        super().setup()
        self.conn_id = self.server.state.new_conn()

    def log_message(self, fmt, *args):  # quiet; the JSON log is the record
        pass

    # ---- plumbing ----

    def _send_simple(self, status, body=b"", headers=None, close=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _abort(self, rst):
        """Drops the connection, with a TCP reset if rst."""
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        if rst:
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            except OSError:
                pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR) if not rst else None
        except OSError:
            pass
        try:
            self.connection.close()
        except OSError:
            pass

    def _control(self):
        st = self.server.state
        if self.command == "GET" and self.path == "/__control/log":
            with st.lock:
                body = json.dumps(st.log).encode()
            self._send_simple(200, body, {"Content-Type": "application/json"})
            return
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n > 0 else b""
        if self.path == "/__control/faults":
            st.set_rules(json.loads(data.decode() or "[]"))
            with st.lock:
                st.log = []
            self._send_simple(200, b"ok")
        elif self.path == "/__control/reset":
            st.set_rules([])
            with st.lock:
                st.log = []
            self._send_simple(200, b"ok")
        elif self.path == "/__control/quit":
            self._send_simple(200, b"bye", close=True)
            threading.Thread(target=self.server.shutdown, daemon=True).start()
        else:
            self._send_simple(404, b"unknown control path")

    # ---- requests ----

    def do_POST(self):
        if self.path.startswith("/__control/"):
            return self._control()
        self._send_simple(405, b"method not allowed", {"Allow": "GET, HEAD"})

    def do_HEAD(self):
        self._serve()

    def do_GET(self):
        if self.path.startswith("/__control/"):
            return self._control()
        self._serve()

    def _serve(self):
        st = self.server.state
        t = time.monotonic() - st.t0
        path = self.path.split("?", 1)[0].lstrip("/")
        rng = self.headers.get("Range") or ""
        rule = st.take_fault(path)
        fault = rule["fault"] if rule else ""
        entry = {"conn": self.conn_id, "method": self.command, "path": path, "range": rng,
                 "status": 0, "fault": fault, "t": round(t, 4), "sent": 0}
        st.record(entry)
        self._entry = entry
        try:
            entry["status"] = self._respond(path, rng, rule)
        except OSError:  # the client went away (timeout, abort): nothing more to send
            self.close_connection = True

    def _respond(self, path, rng, rule):
        fault = rule["fault"] if rule else ""
        if fault == "status":
            status = int(rule.get("status", 500))
            headers = {"Content-Type": "text/plain"}
            if "retry_after" in rule:
                headers["Retry-After"] = str(rule["retry_after"])
            self._send_simple(status, f"scripted {status}\n".encode(), headers)
            return status
        if fault == "redirect":
            port = self.server.server_address[1]
            loc = str(rule.get("location", "")).replace("{url}", f"http://127.0.0.1:{port}")
            self._send_simple(302, b"moved\n", {"Location": loc})
            return 302
        full = os.path.realpath(os.path.join(self.server.state.root, path))
        if not (full == self.server.state.root or full.startswith(self.server.state.root + "/")):
            self._send_simple(404, b"not found\n")
            return 404
        try:
            with open(full, "rb") as f:
                data = f.read()
        except (IsADirectoryError, NotADirectoryError, FileNotFoundError, PermissionError):
            self._send_simple(404, b"not found\n")
            return 404
        size = len(data)
        r = parse_range(rng, size) if fault != "ignore_range" else None
        if r == "unsatisfiable":
            self._send_simple(416, b"range not satisfiable\n",
                              {"Content-Range": f"bytes */{size}"})
            return 416
        status = 200
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        first, last = 0, size - 1
        if r is not None:
            status = 206
            first, last = r
        if fault == "bad_range":  # same length, one byte off (backwards when at the end)
            status = 206
            if last + 1 < size:
                first, last = first + 1, last + 1
            elif first > 0:
                first, last = first - 1, last - 1
        if fault == "short_range" and last > first:  # one byte short, the total still true
            status = 206
            if rng.startswith("bytes=-"):
                first += 1  # a suffix that still ends at the end, but starts late
            else:
                last -= 1
        if status == 206:
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"
        body = data[first:last + 1] if size > 0 else b""
        if fault in ("chunked", "chunked_truncate"):
            return self._send_chunked(status, headers, body, fault == "chunked_truncate")
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        declared = int(rule.get("length", 2**62)) if fault == "length" else len(body)
        self.send_header("Content-Length", str(declared))
        self.end_headers()
        self._entry["status"] = status
        if self.command == "HEAD":
            return status
        if fault in ("reset", "truncate"):
            half = len(body) // 2
            self.wfile.write(body[:half])
            self.wfile.flush()
            self._entry["sent"] = half
            time.sleep(0.05)
            self._abort(rst=fault == "reset")
            return status
        if fault == "stall":
            head = body[:min(16, len(body) // 2)]
            self.wfile.write(head)
            self.wfile.flush()
            self._entry["sent"] = len(head)
            deadline = time.monotonic() + float(rule.get("seconds", 3.0))
            while time.monotonic() < deadline:
                time.sleep(0.05)
            self.wfile.write(body[len(head):])
            self.wfile.flush()
            self._entry["sent"] = len(body)
            return status
        self.wfile.write(body)
        self._entry["sent"] = len(body)
        if fault == "length":
            self.wfile.flush()
            time.sleep(0.05)
            self._abort(rst=False)
        return status


    def _send_chunked(self, status, headers, body, truncate):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._entry["status"] = status
        if self.command == "HEAD":
            return status
        end = len(body) // 2 if truncate else len(body)
        for i in range(0, end, 1000):
            piece = body[i:min(i + 1000, end)]
            self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            self._entry["sent"] += len(piece)
        if truncate:
            self.wfile.flush()
            time.sleep(0.05)
            self._abort(rst=False)
            return status
        self.wfile.write(b"0\r\n\r\n")
        return status


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def serve(root, port_file, rules, max_lifetime, port=0):
    state = State(root, rules)
    srv = Server(("127.0.0.1", port), Handler)
    srv.state = state

    def lifetime():
        time.sleep(max_lifetime)
        sys.stderr.write(f"fault_server: max lifetime {max_lifetime} s reached, exiting\n")
        os._exit(0)

    threading.Thread(target=lifetime, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    if port_file:
        tmp = f"{port_file}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(f"{srv.server_address[1]}\n")
        os.replace(tmp, port_file)
    try:
        srv.serve_forever(poll_interval=0.1)
    finally:
        srv.server_close()


class FaultServer:
    """Context manager running fault_server.py as a child process on a free port."""

    def __init__(self, root, max_lifetime=120.0, start_timeout=10.0):
        self.root = os.path.abspath(root)
        self.max_lifetime = max_lifetime
        self.start_timeout = start_timeout
        self.proc = None
        self.port = None
        self._port_file = None
        self._atexit = False

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        import tempfile
        fd, self._port_file = tempfile.mkstemp(prefix="shardmill-fault-port-")
        os.close(fd)
        os.unlink(self._port_file)
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--root", self.root, "--port-file",
             self._port_file, "--max-lifetime", str(self.max_lifetime)],
            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"fault_server exited with {self.proc.returncode}")
            if os.path.exists(self._port_file):
                self.port = int(open(self._port_file).read().strip())
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("fault_server did not start")

    def stop(self):
        p = self.proc
        self.proc = None
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        if self._port_file:
            try:
                os.unlink(self._port_file)
            except OSError:
                pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def _post(self, path, obj=None):
        data = json.dumps(obj).encode() if obj is not None else b""
        req = urllib.request.Request(self.url + path, data=data, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()

    def set_faults(self, rules):
        """Replaces the rules (and clears the request log)."""
        self._post("/__control/faults", list(rules))

    def reset(self):
        self._post("/__control/reset")

    def log(self):
        with urllib.request.urlopen(self.url + "/__control/log", timeout=10) as r:
            return json.loads(r.read().decode())


def main(argv=None):
    ap = argparse.ArgumentParser(description="HTTP/1.1 file server with scripted faults")
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--faults", help="JSON file with the initial list of rules")
    ap.add_argument("--max-lifetime", type=float, default=120.0)
    args = ap.parse_args(argv)
    rules = []
    if args.faults:
        with open(args.faults) as f:
            rules = json.load(f)
    serve(args.root, args.port_file, rules, args.max_lifetime, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
