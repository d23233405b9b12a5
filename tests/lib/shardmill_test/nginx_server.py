#!/usr/bin/python3
"""A real nginx serving a directory on 127.0.0.1:<free port>, for shardmill's HTTP tests.

nginx runs as a non-daemon child (`-g 'daemon off;'`) with its prefix, configuration, pid file,
temp directories and logs in a private temporary directory. It serves static files, so range
requests (206, multipart excluded), HEAD and keep-alive are nginx's own. The access log has one
line per request, tab-separated:

    connection  connection_requests  status  method  uri  range  body_bytes_sent  request_time

so tests can count requests and connections server-side (see `NginxServer.requests()`).

Python (always /usr/bin/python3):

    with NginxServer(root) as srv:        # srv.url, srv.port, srv.tmpdir, srv.access_log
                                          # NginxServer(root, tls=True): https with a fresh
                                          # self-signed certificate (tests of TLS verification)
                                          # NginxServer(root, cors=True): CORS headers and
                                          # OPTIONS answered (a viewer page on another origin)
        ...                               # srv.requests() -> list of dicts, srv.mark()
                                          # srv.requests(since=mark) -> only the newer ones

CLI (for CMake fixtures and shell use):

    nginx_server.py --root DIR --port-file F [--url-file U] [--max-lifetime S]
        runs in the foreground until SIGTERM/SIGINT or S seconds (default 900) have passed
    nginx_server.py --root DIR --port-file F --pid-file P --detach ...
        starts the same in the background (its own session) and returns once it is serving;
        P holds the pid of the background supervisor
    nginx_server.py --stop --pid-file P
        stops a detached server (SIGTERM to the pid in P, then waits; SIGKILL after 10 s)
    nginx_server.py --root DIR -- COMMAND [ARGS...]
        runs COMMAND with SM_TEST_HTTP_URL=http://127.0.0.1:<port> and SM_TEST_HTTP_ROOT=DIR,
        stops nginx afterwards and exits with COMMAND's status

Only ever binds 127.0.0.1. Stops nginx by its pid, never by name. Works as root (`user root;`).
"""

import argparse
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

NGINX = os.environ.get("SM_NGINX", "/usr/sbin/nginx")

# cors=True: what a viewer on another origin needs (tests/viewer): any origin, the Range header
# allowed (a suffix range "bytes=-N" is not CORS-safelisted, so the browser asks first with
# OPTIONS), Content-Range and Content-Length exposed.
CORS_CONF = """\
            add_header Access-Control-Allow-Origin "*" always;
            add_header Access-Control-Allow-Headers "Range" always;
            add_header Access-Control-Expose-Headers "Content-Range, Content-Length" always;
            if ($request_method = OPTIONS) {
                add_header Access-Control-Allow-Origin "*";
                add_header Access-Control-Allow-Methods "GET, HEAD, OPTIONS";
                add_header Access-Control-Allow-Headers "Range";
                add_header Access-Control-Max-Age 600;
                return 204;
            }
"""

LOG_FORMAT = ("$connection\\t$connection_requests\\t$status\\t$request_method\\t$request_uri\\t"
              "$http_range\\t$body_bytes_sent\\t$request_time")

CONF = """\
{user}
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{
    worker_connections 512;
}}
http {{
    types {{
        application/json json;
        application/octet-stream bin;
        text/html html;
        text/javascript js mjs;
        text/css css;
        application/wasm wasm;
    }}
    default_type application/octet-stream;
    log_format sm_tests "{log_format}";
    access_log {tmp}/access.log sm_tests;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 100000;
    server_tokens off;
    etag off;
    server {{
        listen 127.0.0.1:{port}{ssl};
        server_name localhost;
{tls_conf}
        root {root};
        autoindex off;
        location / {{
{cors_conf}            try_files $uri =404;
        }}
    }}
}}
"""


def free_port():
    """A port that was free on 127.0.0.1 a moment ago (nginx start is retried on a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port):  # a TCP connect is enough, also for TLS
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class NginxServer:
    """Context manager: a private nginx serving `root` on 127.0.0.1:<free port>."""

    def __init__(self, root, port=None, start_timeout=10.0, tls=False, cors=False):
        self.root = os.path.abspath(root)
        self.tls = tls
        self.cors = cors
        self.want_port = port
        self.start_timeout = start_timeout
        self.proc = None
        self.port = None
        self.tmpdir = None
        self._atexit = False

    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def access_log(self):
        return os.path.join(self.tmpdir, "access.log")

    @property
    def error_log(self):
        return os.path.join(self.tmpdir, "error.log")

    def _write_conf(self, port):
        user = "user root;" if os.geteuid() == 0 else ""
        tls_conf = ""
        if self.tls:
            tls_conf = (f"        ssl_certificate {self.tmpdir}/cert.pem;\n"
                        f"        ssl_certificate_key {self.tmpdir}/key.pem;\n")
        conf = CONF.format(user=user, tmp=self.tmpdir, port=port, root=self.root,
                           log_format=LOG_FORMAT, ssl=" ssl" if self.tls else "",
                           tls_conf=tls_conf, cors_conf=CORS_CONF if self.cors else "")
        path = os.path.join(self.tmpdir, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        return path

    def start(self):
        if not os.path.isdir(self.root):
            raise RuntimeError(f"nginx_server: root {self.root} is not a directory")
        self.tmpdir = tempfile.mkdtemp(prefix="shardmill-nginx-")
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.mkdir(os.path.join(self.tmpdir, d))
        if self.tls:  # a fresh self-signed certificate that no client trusts
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                            "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", os.path.join(self.tmpdir, "key.pem"), "-out",
                            os.path.join(self.tmpdir, "cert.pem")],
                           check=True, capture_output=True, timeout=30)
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        last = ""
        for _ in range(5):
            port = self.want_port or free_port()
            conf = self._write_conf(port)
            err = open(os.path.join(self.tmpdir, "stderr.log"), "ab")
            self.proc = subprocess.Popen(
                [NGINX, "-p", self.tmpdir + "/", "-e", self.error_log, "-c", conf, "-g",
                 "daemon off;"], stdin=subprocess.DEVNULL, stdout=err, stderr=err)
            err.close()
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if _port_open(port):
                    self.port = port
                    # the probe connection is logged by nobody (no request), nothing to skip
                    return self
                time.sleep(0.02)
            if self.proc.poll() is None:  # did not come up in time
                self._kill()
            last = self._tail(self.error_log) + self._tail(os.path.join(self.tmpdir,
                                                                          "stderr.log"))
            if self.want_port or "Address already in use" not in last:
                break
        self.stop()
        raise RuntimeError(f"nginx did not start: {last.strip()}")

    @staticmethod
    def _tail(path, n=2000):
        try:
            with open(path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def _kill(self):
        p = self.proc
        if p is None or p.poll() is not None:
            return
        # QUIT = graceful shutdown of master and worker; TERM = fast; KILL only the master's pid.
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)

    def stop(self):
        self._kill()
        # The worker exits with the master; check by its pid if the pid file is still there.
        self.proc = None
        if self.tmpdir is not None and os.environ.get("SM_KEEP_NGINX_LOGS") is None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # ---- access log ----

    def mark(self):
        """A position in the access log; requests(since=mark) returns only later requests."""
        try:
            return os.path.getsize(self.access_log)
        except OSError:
            return 0

    def requests(self, since=0, expect=None, timeout=3.0):
        """Parsed access-log lines after `since`: dicts with conn, conn_req, status, method, uri,
        range, bytes, time. nginx logs a request after sending its response, so a client may be
        done before the last line is written: with `expect`, waits (up to timeout) until that
        many lines are there; without, until the log has not grown for 100 ms."""
        deadline = time.monotonic() + timeout
        prev = None
        while True:
            time.sleep(0.1 if expect is None else 0.02)
            out = self._parse(since)
            if expect is not None and len(out) >= expect:
                time.sleep(0.05)  # and a moment for any line beyond the expected ones
                return self._parse(since)
            if (expect is None and len(out) == prev) or time.monotonic() > deadline:
                return out
            prev = len(out)

    def _parse(self, since):
        out = []
        try:
            with open(self.access_log, "rb") as f:
                f.seek(since)
                data = f.read().decode("utf-8", "replace")
        except OSError:
            return out
        for line in data.splitlines():
            p = line.split("\t")
            if len(p) < 8:
                continue
            out.append({"conn": int(p[0]), "conn_req": int(p[1]), "status": int(p[2]),
                        "method": p[3], "uri": p[4], "range": "" if p[5] == "-" else p[5],
                        "bytes": int(p[6]), "time": float(p[7])})
        return out


def _write_atomic(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _serve_foreground(args):
    srv = NginxServer(args.root, port=args.port)
    stop = {"flag": False}

    def on_signal(signum, frame):
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    srv.start()
    try:
        if args.port_file:
            _write_atomic(args.port_file, f"{srv.port}\n")
        if args.url_file:
            _write_atomic(args.url_file, f"{srv.url}\n")
        if args.log_path_file:
            _write_atomic(args.log_path_file, f"{srv.access_log}\n")
        deadline = time.monotonic() + args.max_lifetime
        while not stop["flag"] and time.monotonic() < deadline and srv.proc.poll() is None:
            time.sleep(0.1)
    finally:
        srv.stop()
        for f in (args.port_file, args.url_file, args.log_path_file):
            if f:
                try:
                    os.unlink(f)
                except OSError:
                    pass
    return 0


def _detach(args, argv):
    if not args.pid_file or not args.port_file:
        sys.exit("nginx_server.py: --detach needs --pid-file and --port-file")
    for f in (args.port_file, args.pid_file):
        try:
            os.unlink(f)
        except OSError:
            pass
    child_argv = [sys.executable, os.path.abspath(__file__)] + [a for a in argv if a != "--detach"]
    log = open(args.pid_file + ".log", "ab")
    p = subprocess.Popen(child_argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True)
    log.close()
    _write_atomic(args.pid_file, f"{p.pid}\n")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if os.path.exists(args.port_file):
            print(f"nginx_server: serving {args.root} on 127.0.0.1:"
                  f"{open(args.port_file).read().strip()} (supervisor pid {p.pid})")
            return 0
        if p.poll() is not None:
            break
        time.sleep(0.05)
    if p.poll() is None:
        p.terminate()
        p.wait(timeout=10)
    sys.stderr.write(NginxServer._tail(args.pid_file + ".log"))
    sys.exit("nginx_server.py: the detached server did not start")


def _stop(args):
    if not args.pid_file:
        sys.exit("nginx_server.py: --stop needs --pid-file")
    try:
        pid = int(open(args.pid_file).read().strip())
    except (OSError, ValueError):
        print("nginx_server: nothing to stop")
        return 0
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.unlink(args.pid_file)
    except OSError:
        pass
    return 0


def _run_command(args, cmd):
    with NginxServer(args.root, port=args.port) as srv:
        env = dict(os.environ, SM_TEST_HTTP_URL=srv.url, SM_TEST_HTTP_ROOT=srv.root)
        try:
            return subprocess.call(cmd, env=env, timeout=args.max_lifetime)
        except subprocess.TimeoutExpired:
            sys.stderr.write("nginx_server.py: the command ran past --max-lifetime\n")
            return 124


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", help="directory to serve")
    ap.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    ap.add_argument("--port-file", help="write the port here once serving")
    ap.add_argument("--url-file", help="write http://127.0.0.1:PORT here once serving")
    ap.add_argument("--log-path-file", help="write the access log's path here")
    ap.add_argument("--pid-file", help="with --detach / --stop")
    ap.add_argument("--detach", action="store_true")
    ap.add_argument("--stop", action="store_true")
    ap.add_argument("--max-lifetime", type=float, default=900.0)
    args = ap.parse_args(argv)
    if args.stop:
        return _stop(args)
    if not args.root:
        ap.error("--root is required")
    if cmd:
        return _run_command(args, cmd)
    if args.detach:
        return _detach(args, argv)
    return _serve_foreground(args)


if __name__ == "__main__":
    sys.exit(main())
