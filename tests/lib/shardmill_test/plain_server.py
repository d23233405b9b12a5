#!/usr/bin/python3
"""Python's own `http.server` (what `python3 -m http.server` runs: ThreadingHTTPServer with
SimpleHTTPRequestHandler), which ignores `Range` and answers 200 with the whole file, plus a
request log. Nothing of the serving is changed; the subclass only records, per request, the
method, path, Range header, status and the body bytes it wrote (the Content-Length it served),
and appends it as one JSON line to --log as each request completes.

CLI: plain_server.py --root DIR --port-file F --log L [--max-lifetime S]
The port is written to F once listening (127.0.0.1 only); SIGTERM stops it (by pid)."""

import argparse
import functools
import http.server
import json
import os
import signal
import sys
import threading
import time


class LoggingHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):  # the JSON log below is the record
        pass

    def send_head(self):
        self._sent_len = 0
        self._status = 0
        return super().send_head()

    def send_response(self, code, message=None):
        self._status = code
        super().send_response(code, message)

    def send_header(self, keyword, value):
        if keyword.lower() == "content-length" and 200 <= getattr(self, "_status", 0) < 300:
            self._sent_len = int(value)
        super().send_header(keyword, value)

    def copyfile(self, source, outputfile):
        super().copyfile(source, outputfile)
        self._copied = True

    def _record(self):
        e = {"method": self.command, "path": self.path.split("?", 1)[0].lstrip("/"),
             "range": self.headers.get("Range") or "", "status": getattr(self, "_status", 0),
             "sent": self._sent_len if getattr(self, "_copied", False) else 0}
        with self.server.log_lock:
            self.server.log_file.write(json.dumps(e) + "\n")
            self.server.log_file.flush()

    def do_GET(self):
        self._copied = False
        super().do_GET()
        self._record()

    def do_HEAD(self):
        self._copied = False
        super().do_HEAD()
        self._record()


def serve(srv, port_file, max_lifetime):
    """Serves srv (bound to 127.0.0.1:0) until SIGTERM or max_lifetime seconds, after writing its
    port to port_file atomically (the parent waits for that file). Never returns normally."""
    def stop(*_):
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=lambda: (time.sleep(max_lifetime), stop()), daemon=True).start()
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{srv.server_address[1]}\n")
    os.replace(tmp, port_file)
    srv.serve_forever(poll_interval=0.1)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--max-lifetime", type=float, default=120.0)
    a = ap.parse_args(argv)
    handler = functools.partial(LoggingHandler, directory=os.path.abspath(a.root))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.log_lock = threading.Lock()
    srv.log_file = open(a.log, "a")
    return serve(srv, a.port_file, a.max_lifetime)


if __name__ == "__main__":
    sys.exit(main())
