#!/usr/bin/python3
"""A verifying proxy in front of s3rver (which checks no SigV4 signature): every request's AWS
Signature Version 4 is recomputed with botocore's S3SigV4Auth (Debian python3-botocore, an
implementation independent of shardmill's) from the headers the request says it signed, with the
secret this proxy was given. A mismatch, an unknown access key id, a missing signature, a missing
or unsigned x-amz-content-sha256 or host, a wrong region or service, or a date more than 15
minutes off are answered as S3 does: 403 with an XML error body (SignatureDoesNotMatch,
InvalidAccessKeyId, AccessDenied, RequestTimeTooSkewed). Good requests are forwarded to s3rver
without their signature (s3rver accepts unsigned requests), Range included, and the answer is
relayed byte for byte.

The canonical URI is computed as S3 computes it: the path decoded, then URI-encoded again with
only RFC 3986 unreserved characters and '/' left alone, so a client that encodes a key otherwise
fails here as it would on AWS.

s3rver 3.7.1 reads a suffix range "bytes=-N" as "bytes=0-N" (S3 answers the last N bytes): the
proxy asks s3rver for the same bytes by offset (a HEAD for the size first), so the client sees
S3's answer.

--control FILE (JSON, re-read at every request, so a test reconfigures a running proxy):
  {"token": T}              requests must carry x-amz-security-token T (else 403 InvalidToken);
  {"inject_503": [SUBSTR, N], "generation": G}
                            the first N requests whose path contains SUBSTR get 503 SlowDown
                            (retry tests); the count restarts whenever G changes;
  {"redirect_301": SUBSTR}  requests whose path contains SUBSTR get S3's 301 PermanentRedirect
                            (a bucket in another region), with a Location header.
Each request is logged as one JSON line to --log: method, path, range, status, signed headers,
access key id, body bytes of a 2xx answer relayed.

CLI: sigv4_proxy.py --upstream-port P --port-file F --log L --access-key K --secret S
     [--region R] [--control FILE] [--max-lifetime S]
SIGTERM stops it (by pid). Binds 127.0.0.1 only."""

import argparse
import datetime
import http.client
import http.server
import json
import os
import re
import socket
import sys
import threading
import urllib.parse
from xml.sax.saxutils import escape

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from shardmill_test import plain_server  # serve: port file, SIGTERM, lifetime

AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,"
                     r"\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$")
SUFFIX_RE = re.compile(r"^bytes=-(\d+)$")
RELAY = ("content-length", "content-range", "content-type", "etag", "last-modified",
         "accept-ranges")


def s3_error_xml(code, message):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>'
            "<RequestId>proxy</RequestId></Error>" % (escape(code), escape(message))).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        # headers and body leave at once, not after the client's delayed ACK (Nagle)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _record(self, status, signed, akid, sent):
        e = {"method": self.command, "path": self.path, "range": self.headers.get("Range") or "",
             "status": status, "signed": signed, "akid": akid, "sent": sent}
        with self.server.log_lock:
            self.server.log_file.write(json.dumps(e) + "\n")
            self.server.log_file.flush()

    # Each request is logged before its answer is sent: once the client has the answer, the
    # test reading the log sees the record.

    def _error(self, status, code, message, signed=None, akid=None):
        body = s3_error_xml(code, message)
        self._record(status, signed, akid, 0)
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _verify(self):
        """None if the request is correctly signed, else (status, code, message, signed, akid)."""
        cfg = self.server.cfg
        auth = self.headers.get("Authorization")
        if auth is None:
            return 403, "AccessDenied", "Anonymous access is forbidden here", None, None
        m = AUTH_RE.match(auth.strip())
        if m is None:
            return 400, "AuthorizationHeaderMalformed", "cannot parse " + auth, None, None
        akid, date8, region, service, signed_s, sig = m.groups()
        signed = signed_s.split(";")
        if akid != cfg.access_key:
            return (403, "InvalidAccessKeyId",
                    "The AWS Access Key Id you provided does not exist in our records.", signed,
                    akid)
        if region != cfg.region or service != "s3":
            return (400, "AuthorizationHeaderMalformed",
                    f"the region '{region}' is wrong; expecting '{cfg.region}'", signed, akid)
        for need in ("host", "x-amz-content-sha256", "x-amz-date"):
            if need not in signed or self.headers.get(need) is None:
                return (403, "AccessDenied", f"{need} must be sent and signed", signed, akid)
        if signed != sorted(signed):
            return 403, "SignatureDoesNotMatch", "SignedHeaders not sorted", signed, akid
        amz_date = self.headers["x-amz-date"]
        try:
            t = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
                tzinfo=datetime.timezone.utc)
        except ValueError:
            return 403, "AccessDenied", "bad x-amz-date", signed, akid
        if abs((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds()) > 900:
            return (403, "RequestTimeTooSkewed",
                    "The difference between the request time and the current time is too large.",
                    signed, akid)
        if amz_date[:8] != date8:
            return 403, "SignatureDoesNotMatch", "credential date differs", signed, akid
        raw_path, _, query = self.path.partition("?")
        canon_path = urllib.parse.quote(urllib.parse.unquote(raw_path), safe="/~")
        url = "http://" + self.headers["host"] + canon_path + ("?" + query if query else "")
        headers = {h: self.headers[h] for h in signed if self.headers.get(h) is not None}
        if len(headers) != len(signed):
            return 403, "SignatureDoesNotMatch", "a signed header is missing", signed, akid
        req = AWSRequest(method=self.command, url=url, headers=headers)
        req.context["timestamp"] = amz_date
        token = self.headers.get("x-amz-security-token")
        signer = S3SigV4Auth(Credentials(cfg.access_key, cfg.secret, token), "s3", cfg.region)
        creq = signer.canonical_request(req)
        sts = signer.string_to_sign(req, creq)
        want = signer.signature(sts, req)
        if want != sig:
            return (403, "SignatureDoesNotMatch",
                    "The request signature we calculated does not match the signature you "
                    "provided. Check your key and signing method.", signed, akid)
        ctl = self._control()
        if ctl.get("token") is not None and token != ctl["token"]:
            return 403, "InvalidToken", "The provided token is malformed or otherwise invalid.", \
                signed, akid
        return None, signed, akid

    def _control(self):
        path = self.server.cfg.control
        if not path or not os.path.exists(path):
            return {}
        with open(path) as f:
            return json.load(f)

    def _inject(self):
        ctl = self._control()
        if not ctl.get("inject_503"):
            return False
        sub, n = ctl["inject_503"]
        with self.server.log_lock:
            if self.server.generation != ctl.get("generation"):
                self.server.generation = ctl.get("generation")
                self.server.injected = 0
            if sub in self.path and self.server.injected < n:
                self.server.injected += 1
                return True
        return False

    def _handle(self):
        v = self._verify()
        if v[0] is not None:
            self._error(*v)
            return
        _, signed, akid = v
        if self._inject():
            self._error(503, "SlowDown", "Please reduce your request rate.", signed, akid)
            return
        redirect = self._control().get("redirect_301")
        if redirect and redirect in self.path:
            body = s3_error_xml("PermanentRedirect", "The bucket you are attempting to access "
                                "must be addressed using the specified endpoint.")
            self._record(301, signed, akid, 0)
            self.send_response(301)
            self.send_header("Location", "http://127.0.0.1:9/elsewhere" + self.path)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        conn = getattr(self, "_up", None)
        if conn is None:
            conn = self._up = http.client.HTTPConnection("127.0.0.1", self.server.cfg.upstream,
                                                         timeout=30)
        fwd = {"Host": f"127.0.0.1:{self.server.cfg.upstream}"}
        rng = self.headers.get("Range")
        try:
            m = SUFFIX_RE.match(rng or "")
            if m is not None:
                # S3 answers "bytes=-N" with the last N bytes; s3rver 3.7.1 reads it as
                # "bytes=0-N". Ask s3rver for the same bytes by their offsets.
                conn.request("HEAD", self.path, headers=fwd)
                h = conn.getresponse()
                h.read()
                size = int(h.getheader("Content-Length") or 0)
                if h.status == 200 and size > 0:
                    n = int(m.group(1))
                    rng = f"bytes={max(0, size - n)}-{size - 1}" if n > 0 else None
            if rng:
                fwd["Range"] = rng
            conn.request(self.command, self.path, headers=fwd)
            r = conn.getresponse()
            body = r.read()
        except (OSError, http.client.HTTPException):
            self._up = None
            raise
        # the body bytes of a 2xx answer: what a client counts as received (SPEC §3)
        ok = 200 <= r.status < 300 and self.command != "HEAD"
        self._record(r.status, signed, akid, len(body) if ok else 0)
        self.send_response(r.status)
        for k, val in r.getheaders():
            if k.lower() in RELAY:
                self.send_header(k, val)
        if r.getheader("Content-Length") is None:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        self._handle()

    def do_HEAD(self):
        self._handle()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream-port", type=int, required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--control")
    ap.add_argument("--max-lifetime", type=float, default=240.0)
    a = ap.parse_args(argv)

    class Cfg:
        pass

    cfg = Cfg()
    cfg.upstream = a.upstream_port
    cfg.access_key = a.access_key
    cfg.secret = a.secret
    cfg.region = a.region
    cfg.control = a.control
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.cfg = cfg
    srv.injected = 0
    srv.generation = None
    srv.log_lock = threading.Lock()
    srv.log_file = open(a.log, "a")
    return plain_server.serve(srv, a.port_file, a.max_lifetime)


if __name__ == "__main__":
    sys.exit(main())
