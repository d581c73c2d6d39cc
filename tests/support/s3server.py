"""An S3 endpoint for the object-store tests: moto's server behind a counting reverse proxy.

moto runs as a subprocess (`python -m moto.server`) on a free loopback port. The test
process runs a small HTTP/1.1 reverse proxy in front of it on another free port and records
every request that passes through it, so a test can assert how many requests (and which:
LIST, HEAD, ranged GET, PUT) the code under test made. Code under test talks to `endpoint`
(the proxy); test setup that must not be counted talks to `direct_endpoint` (moto itself),
which is what `client()`, `make_bucket()` and `upload_tree()` use.

    with S3Server() as s3:
        s3.make_bucket("logs")
        s3.upload_tree(local_dir, "logs", "prefix")
        s3.reset_counts()
        ...code under test with s3.env() / s3.endpoint...
        assert [r.method for r in s3.requests()] == ["GET", ...]

The proxy streams bodies both ways and forwards every end-to-end header as sent (Range,
Content-Length, If-None-Match, the SigV4 headers, a chunked or aws-chunked upload body
byte for byte), so signatures still verify at moto. Clients keep their connections
(keep-alive); each proxied request uses a fresh connection to moto, which never leaves a
stale upstream connection to retry on.

Faults: `inject(Fault(...), ...)` makes the proxy answer matching requests the way a
throttled or failing store does (503 SlowDown, 500 InternalError, a connection reset
before or after the response headers, a body shorter than its Content-Length, a body cut
short inside a well-formed answer, a stall before or inside the body), for the first
`times` matches after `skip`, then pass them through again; the rules hold until the
`with` block ends. Each faulted request is recorded with its `fault` and `rule`.

    with s3.inject(Fault("slowdown", op="GET", key="*.index")) as faults:
        ...code under test...
    assert faults.fired == 1

A rule can also throttle the way a store under load does, for as long as the block lasts:
in bursts (`every=10, times=3`: three matches in a row out of every ten), at random
(`probability=1/3`, seeded), or in windows of time (`burst_s=2, every_s=5`: every match
in the first 2 s of every 5 s since the block began).

Credentials: by default moto accepts any access key and secret. `S3Server(enforce_auth=True)`
turns on moto's IAM simulation: while moto still accepts anything, the server creates an IAM
user with an s3:* policy and an access key, then POSTs "0" to moto's `/moto-api/reset-auth`
(the server-mode form of INITIAL_NO_AUTH_ACTION_COUNT=0: from then on every request must be
signed by a key that exists in moto's IAM). `access_key`/`secret_key` and `env()` then carry
the created key; a wrong secret gets 403 SignatureDoesNotMatch, an unknown key 403
InvalidAccessKeyId.
"""
import http.client
import http.server
import os
import contextlib
import fnmatch
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, quote, unquote, urlsplit

REGION = "us-east-1"
DEFAULT_ACCESS_KEY = "testing"
DEFAULT_SECRET_KEY = "testing-secret-value"
# Not forwarded: they describe one hop (RFC 9110 7.6.1). Transfer-Encoding is handled
# apart: a chunked request body is forwarded chunked, byte for byte. Expect is answered by
# the proxy itself (100 Continue) and not signed by SigV4 clients.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
              "proxy-authorization", "te", "trailer", "upgrade", "expect"}
COPY_BLOCK = 64 * 1024


@dataclass(frozen=True)
class Request:
    """One request as the proxy saw it. bucket/key are None when the path has none."""
    method: str
    bucket: str | None
    key: str | None
    query: dict
    range_header: str | None
    status: int
    response_bytes: int
    fault: str | None = None  # the injected fault this request got (see Fault)
    rule: "Fault | None" = field(default=None, compare=False, repr=False)  # which rule
    at: float = field(default=0.0, compare=False, repr=False)  # time.monotonic() on arrival

    @property
    def op(self) -> str:
        """The method, or LIST for a ListObjects(V2) request."""
        return "LIST" if self.method == "GET" and self.key is None and \
            ("list-type" in self.query or "prefix" in self.query) else self.method


# Injected faults: what the proxy answers instead of (or after) moto's response. The kinds
# that cut a body change nothing in an answer without one (HEAD, PUT, DELETE).
FAULT_KINDS = (
    "slowdown",             # 503 SlowDown (S3's throttling), an S3 XML error body
    "internal",             # 500 InternalError
    "reset",                # the connection reset (RST) before any response byte
    "reset_after_headers",  # moto's status line and headers, then a reset
    "short_body",           # moto's headers (its Content-Length), half the body, then FIN
    "truncated",            # half the body, its Content-Length saying so (a cut-off copy
                            # that no transport check can notice)
    "stall",                # nothing for `stall_s` seconds, then the connection closed
    "stall_mid_body",       # moto's headers and half the body, then nothing for `stall_s`
)
_ERROR_BODIES = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "internal": (500, "Internal Server Error", "InternalError",
                 "We encountered an internal error. Please try again."),
}
# Kinds that need moto's real response: the request always reaches moto first.
_NEED_RESPONSE = ("reset_after_headers", "short_body", "truncated", "stall_mid_body")


@dataclass
class Fault:
    """A rule: requests matching op/key/ranged/min_range_start/conditional get `kind`,
    the first `times` of them after `skip` matches passed through; with `every`, the same
    again in each `every` matches after those (`times` in a row out of every `every`);
    with `probability`, each match at random (a generator seeded with `seed`); with
    `burst_s` and `every_s`, each match in the first `burst_s` seconds of every `every_s`
    seconds since the rules were set (`times` and `skip` are then not used).

    Rules are tried in order: a request that a rule of `times` lets through goes on to
    the next rule that matches it (the second of two such rules gets the retry), but a
    rule with a pattern (`every`, `probability`, `burst_s`) decides alone for every
    request it matches, so that each request meets one draw of one pattern.

    op: GET, HEAD, PUT, DELETE, POST or LIST (a listing); key: a glob on the object key
    (fnmatch: `*` crosses '/'); ranged: only requests with (True) or without (False) a
    Range header; min_range_start: only ranged requests starting at or after this byte;
    conditional: only requests carrying this header (If-None-Match, If-Match).
    upstream: moto gets the request before the fault is answered (a write then takes
    effect though the client sees a failure); the kinds that send part of moto's response
    always go upstream."""
    kind: str
    op: str | None = None
    key: str | None = None
    ranged: bool | None = None
    min_range_start: int | None = None
    conditional: str | None = None
    times: int = 1
    skip: int = 0
    upstream: bool = False
    stall_s: float = 3.0
    every: int | None = None
    probability: float | None = None
    seed: int = 0
    burst_s: float | None = None
    every_s: float | None = None
    matched: int = 0  # counted by the proxy
    fired: int = 0
    started: float = 0.0  # set by the proxy when the rules are set (for burst_s)

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {FAULT_KINDS}")
        if self.every is not None and not self.times <= self.every:
            raise ValueError(f"every={self.every} must be at least times={self.times}")
        if self.probability is not None and not 0 <= self.probability <= 1:
            raise ValueError(f"probability={self.probability} is not in [0, 1]")
        if (self.burst_s is None) != (self.every_s is None):
            raise ValueError("burst_s and every_s go together")
        self._random = random.Random(self.seed)

    @property
    def patterned(self) -> bool:
        return self.every is not None or self.probability is not None or \
            self.burst_s is not None

    def fires(self, now: float) -> bool:
        """Whether this match (counted in `matched` already) gets the fault."""
        if self.probability is not None:
            return self._random.random() < self.probability
        if self.burst_s is not None:
            return (now - self.started) % self.every_s < self.burst_s
        past = self.matched - self.skip  # 1 for the first match after skip
        if past <= 0:
            return False
        if self.every is not None:
            past = (past - 1) % self.every + 1
        return past <= self.times

    def matches(self, request: Request, headers) -> bool:
        if self.op is not None and request.op != self.op.upper():
            return False
        if self.key is not None and (request.key is None or
                                     not fnmatch.fnmatchcase(request.key, self.key)):
            return False
        if self.ranged is not None and (request.range_header is not None) != self.ranged:
            return False
        if self.min_range_start is not None:
            start = _range_start(request.range_header)
            if start is None or start < self.min_range_start:
                return False
        if self.conditional is not None and headers.get(self.conditional) is None:
            return False
        return True


def _range_start(header: str | None) -> int | None:
    if not header or not header.startswith("bytes="):
        return None
    first = header[len("bytes="):].split("-", 1)[0].strip()
    return int(first) if first.isdigit() else None


class Injected:
    """The rules of one `inject` block; `fired`: faults answered in all."""

    def __init__(self, faults):
        self.faults = list(faults)

    @property
    def fired(self) -> int:
        return sum(fault.fired for fault in self.faults)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bucket_and_key(path: str) -> tuple[str | None, str | None]:
    """Path-style addressing: /bucket/key (the key may hold slashes)."""
    parts = unquote(path).lstrip("/").split("/", 1)
    bucket = parts[0] or None
    key = parts[1] if len(parts) > 1 and parts[1] else None
    return bucket, key


class _ProxyServer(http.server.ThreadingHTTPServer):
    # Idle keep-alive connections block their threads in a read: closing must not join them.
    daemon_threads = True
    block_on_close = False

    def __init__(self, address, upstream_port: int, record, begin):
        super().__init__(address, _ProxyHandler)
        self.upstream_port = upstream_port
        self.record = record
        self.begin = begin  # a request arrived: requests() waits until it is recorded
        self.faults: list[Fault] = []
        self.faults_lock = threading.Lock()
        self.released = threading.Event()  # set: stalls end now (rules cleared, closing)

    def fault_for(self, request: Request, headers) -> Fault | None:
        with self.faults_lock:
            for fault in self.faults:
                if fault.matches(request, headers):
                    fault.matched += 1
                    if fault.fires(request.at):
                        fault.fired += 1
                        return fault
                    if fault.patterned:
                        return None
        return None


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive to the client
    # Headers and body leave in separate writes: with Nagle's algorithm on, the body waits
    # for the client's delayed ACK (about 40 ms a request on Linux loopback).
    disable_nagle_algorithm = True
    server: _ProxyServer

    def log_message(self, format, *args):  # one line per request would drown test output
        pass

    def _proxy(self):
        self.server.begin()
        split = urlsplit(self.path)
        bucket, key = bucket_and_key(split.path)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        seen = Request(self.command, bucket, key, query, self.headers.get("Range"), None, 0,
                       at=time.monotonic())
        fault = self.server.fault_for(seen, self.headers)
        self._seen, self._fault, self._recorded = seen, fault, False
        status, sent = None, 0  # None: the exchange broke off before moto answered
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=60)
        try:
            if fault is not None and not (fault.upstream or fault.kind in _NEED_RESPONSE):
                self._discard_request_body()
                status = self._answer_fault(fault, None)
                return
            try:
                upstream.putrequest(self.command, self.path, skip_host=True,
                                    skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in HOP_BY_HOP:
                        upstream.putheader(name, value)
                upstream.endheaders()
                self._forward_request_body(upstream)
                response = upstream.getresponse()
            except ConnectionRefusedError:
                # moto is gone: the client gets an answer, the test a recorded 502.
                self.close_connection = True
                self.send_error(502, "moto server unreachable")
                status = 502
            else:
                if fault is not None:
                    status = self._answer_fault(fault, response)
                else:
                    status = response.status
                    sent = self._forward_response(response)
        finally:
            upstream.close()
            self._record(status, sent)

    def _record(self, status: int | None, sent: int):
        if not self._recorded:
            self._recorded = True
            self.server.record(replace(self._seen, status=status, response_bytes=sent,
                                       fault=self._fault.kind if self._fault else None,
                                       rule=self._fault))

    def _discard_request_body(self):
        self._forward_request_body(None)

    def _answer_fault(self, fault: Fault, response) -> int | None:
        """Answers `fault` (after moto's `response` when there is one); the status the
        client saw, None when it got none."""
        self.close_connection = True
        if fault.kind in _ERROR_BODIES:
            if response is not None:
                response.read()
            status, reason, code, message = _ERROR_BODIES[fault.kind]
            body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                    f"<Message>{message}</Message><RequestId>segmentlog-fault</RequestId>"
                    f"</Error>").encode()
            self.close_connection = False  # a real store keeps the connection
            self.send_response_only(status, reason)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()
            return status
        if fault.kind == "reset":
            if response is not None:
                response.read()
            self._reset()
            return None
        if fault.kind == "stall":
            if response is not None:
                response.read()
            self._stall(fault, None, 0)
            return None
        # the kinds that send part of moto's response
        body = response.read()
        if fault.kind == "truncated" and self.command != "HEAD":
            body = body[: len(body) // 2]
            self.close_connection = False  # a well-formed answer: the connection stays
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() in HOP_BY_HOP or name.lower() == "transfer-encoding" or \
                    (name.lower() == "content-length" and self.command != "HEAD"):
                continue
            self.send_header(name, value)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        if fault.kind == "reset_after_headers":
            self._reset()
            return response.status
        sent = 0
        if self.command != "HEAD":
            sent = len(body) if fault.kind == "truncated" else len(body) // 2
            self.wfile.write(body[:sent])
            self.wfile.flush()
        if fault.kind == "stall_mid_body":
            self._stall(fault, response.status, sent)
        self._record(response.status, sent)
        return response.status

    def _reset(self):
        """Closes the connection with an RST (SO_LINGER 0), as a failing store or a
        middlebox does."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.wfile.flush()
        self.connection.close()

    def _stall(self, fault: Fault, status: int | None, sent: int):
        """Sends nothing for `stall_s` seconds (or until the rules are cleared), then
        closes. The request is recorded first: requests() need not wait for the stall."""
        self.close_connection = True
        self._record(status, sent)
        self.server.released.wait(fault.stall_s)

    def _forward_request_body(self, upstream: http.client.HTTPConnection | None):
        """Copies the request body to moto; with `upstream` None, reads it and drops it."""
        send = upstream.send if upstream is not None else (lambda data: None)
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            # Copied raw, chunk framing and trailers included: the end of the body is the
            # zero-size chunk and the empty line after its trailers.
            while True:
                size_line = self.rfile.readline()
                send(size_line)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        trailer = self.rfile.readline()
                        send(trailer)
                        if trailer in (b"\r\n", b"\n", b""):
                            return
                self._copy(self.rfile, send, size + 2)  # data and its CRLF
        else:
            self._copy(self.rfile, send, int(self.headers.get("Content-Length") or 0))

    @staticmethod
    def _copy(source, send, length: int):
        while length > 0:
            block = source.read(min(COPY_BLOCK, length))
            if not block:
                raise ConnectionError("the client closed the connection inside a body")
            send(block)
            length -= len(block)

    def _forward_response(self, response: http.client.HTTPResponse) -> int:
        """Sends the status, headers and body on; returns the number of body bytes."""
        self.send_response_only(response.status, response.reason)
        headers = [(name, value) for name, value in response.getheaders()
                   if name.lower() not in HOP_BY_HOP and name.lower() != "transfer-encoding"]
        has_length = any(name.lower() == "content-length" for name, _ in headers)
        no_body = self.command == "HEAD" or response.status in (204, 304) or response.status < 200
        # A body without a length (moto's chunked or close-delimited) goes on chunked, so
        # the client connection can stay open.
        chunk = not has_length and not no_body
        for name, value in headers:
            self.send_header(name, value)
        if chunk:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        if no_body:
            response.read()
            return 0
        while True:
            block = response.read1(COPY_BLOCK) if chunk else response.read(COPY_BLOCK)
            if not block:
                break
            sent += len(block)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block) if chunk else block)
        if chunk:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        return sent

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _proxy


class S3Server:
    """moto's S3 in a subprocess and a counting proxy in front of it; see the module docstring."""

    def __init__(self, enforce_auth: bool = False, startup_timeout: float = 60.0,
                 parent: str | None = None, environ: dict | None = None):
        """`parent`: the directory of its working files (else tempfile's default one);
        `environ`: the environment moto runs in (else this process's, as it is now). A
        server started off the main thread takes both from the thread that made them
        (support/background.py)."""
        self._requests: list[Request] = []
        self._lock = threading.Lock()
        self._recorded = threading.Condition(self._lock)
        self._in_flight = 0
        self._process = None
        self._proxy = None
        self._workdir = tempfile.mkdtemp(prefix="segmentlog-s3-", dir=parent)
        self._environ = dict(os.environ if environ is None else environ)
        self.access_key = DEFAULT_ACCESS_KEY
        self.secret_key = DEFAULT_SECRET_KEY
        self.region = REGION
        self._enforce = enforce_auth
        self._s3_client = None
        try:
            self._start_moto(startup_timeout)
            self._start_proxy()
            if enforce_auth:
                self._enforce_auth()
        except BaseException:
            self.close()
            raise

    # -- lifecycle ---------------------------------------------------------------------

    def _start_moto(self, timeout: float):
        self.moto_port = free_port()
        self.direct_endpoint = f"http://127.0.0.1:{self.moto_port}"
        self._log_path = os.path.join(self._workdir, "moto.log")
        env = dict(self._environ)
        env.pop("INITIAL_NO_AUTH_ACTION_COUNT", None)  # enforce_auth decides, not the caller's env
        with open(self._log_path, "wb") as log:  # werkzeug logs every request: a pipe would fill
            self._process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.moto_port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=self._workdir)
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"moto server exited with {self._process.returncode}:\n"
                                   + self._log_tail())
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.moto_port, timeout=2)
                conn.request("GET", "/moto-api/data.json")
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not answer within {timeout} s:\n"
                                       + self._log_tail())
                time.sleep(0.1)

    def _start_proxy(self):
        self._proxy = _ProxyServer(("127.0.0.1", 0), self.moto_port, self._record, self._begin)
        self.endpoint = f"http://127.0.0.1:{self._proxy.server_address[1]}"
        self._proxy_thread = threading.Thread(target=self._proxy.serve_forever,
                                              name="s3-counting-proxy", daemon=True)
        self._proxy_thread.start()

    def _enforce_auth(self):
        iam = self._boto_client("iam")
        user = "segmentlog-tests"
        iam.create_user(UserName=user)
        iam.put_user_policy(
            UserName=user, PolicyName="s3-all",
            PolicyDocument='{"Version": "2012-10-17", "Statement": '
                           '[{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}')
        key = iam.create_access_key(UserName=user)["AccessKey"]
        self.access_key, self.secret_key = key["AccessKeyId"], key["SecretAccessKey"]
        conn = http.client.HTTPConnection("127.0.0.1", self.moto_port, timeout=10)
        conn.request("POST", "/moto-api/reset-auth", body=b"0")
        response = conn.getresponse()
        body = response.read()
        conn.close()
        if response.status != 200:
            raise RuntimeError(f"moto refused reset-auth: {response.status} {body!r}")

    def _log_tail(self, size: int = 4000) -> str:
        try:
            with open(self._log_path, "rb") as log:
                return log.read()[-size:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self):
        if self._proxy is not None:
            self._proxy.released.set()
            self._proxy.shutdown()
            self._proxy.server_close()
            self._proxy = None
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
            self._process = None
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- counting ----------------------------------------------------------------------

    def _begin(self):
        with self._recorded:
            self._in_flight += 1

    def _record(self, request: Request):
        with self._recorded:
            self._requests.append(request)
            self._in_flight -= 1
            self._recorded.notify_all()

    def requests(self) -> list[Request]:
        """Every request so far; the client may have its answer before the proxy thread
        records it, so requests under way are waited for (a few seconds at most)."""
        with self._recorded:
            self._recorded.wait_for(lambda: self._in_flight == 0, timeout=5)
            return list(self._requests)

    def reset_counts(self):
        with self._lock:
            self._requests.clear()

    # -- faults ------------------------------------------------------------------------

    @contextlib.contextmanager
    def inject(self, *faults: Fault):
        """Answers requests matching `faults` with them (see Fault) inside the block;
        yields an Injected whose `fired` counts the faults answered."""
        proxy = self._proxy
        with proxy.faults_lock:
            if proxy.faults:
                raise RuntimeError("faults are already injected (one inject block at a time)")
            proxy.released.clear()
            started = time.monotonic()
            for fault in faults:
                fault.started = started
            proxy.faults = list(faults)
        try:
            yield Injected(faults)
        finally:
            with proxy.faults_lock:
                proxy.faults = []
            proxy.released.set()  # stalled handlers stop waiting

    # -- setup through the direct endpoint ---------------------------------------------

    def env(self) -> dict:
        """Environment for code under test: the proxy endpoint, this server's credentials."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint,
            # No instance-metadata lookups (each one waits for a timeout off EC2).
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def store_options(self) -> dict:
        """The same endpoint and credentials as segmentlog's store.* options."""
        return {"store.endpoint": self.endpoint, "store.region": self.region,
                "store.accessKeyId": self.access_key, "store.secretAccessKey": self.secret_key}

    def _boto_client(self, service: str):
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            service, endpoint_url=self.direct_endpoint, region_name=self.region,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    def client(self):
        """A boto3 S3 client on moto directly: its requests are not counted. One for the
        server's life (boto3 clients are thread-safe; making one costs 0.1 to 0.5 s)."""
        if self._s3_client is None:
            self._s3_client = self._boto_client("s3")
        return self._s3_client

    def make_bucket(self, name: str):
        self.client().create_bucket(Bucket=name)

    def upload_tree(self, local_dir, bucket: str, prefix: str = "") -> list[str]:
        """Uploads every file under local_dir as prefix/relative/path; returns the keys.
        Several at a time: a log of a thousand segments is thousands of small objects."""
        uploads = []
        for root, dirs, files in os.walk(local_dir):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                relative = os.path.relpath(path, local_dir).replace(os.sep, "/")
                key = f"{prefix.strip('/')}/{relative}" if prefix.strip("/") else relative
                uploads.append((path, key))

        def body(path):
            with open(path, "rb") as handle:
                return handle.read()

        self.put_objects(bucket, ((key, lambda path=path: body(path)) for path, key in uploads))
        return [key for _, key in uploads]

    def put_objects(self, bucket: str, objects) -> None:
        """PUTs (key, body) pairs to moto directly, eight at a time; a body may be a
        function that returns the bytes. Without enforce_auth, moto checks no signature:
        the requests then go out as plain HTTP with a placeholder one, which halves the
        time of a thousand small uploads (boto3 spends as much CPU on each request as
        moto does); with it, through boto3."""
        from concurrent.futures import ThreadPoolExecutor

        local = threading.local()
        s3 = self.client() if self._enforce else None  # boto3 clients are thread-safe
        headers = {"Authorization": "AWS4-HMAC-SHA256 Credential=" + self.access_key +
                   f"/20000101/{self.region}/s3/aws4_request, SignedHeaders=host, "
                   "Signature=0", "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
                   "x-amz-date": "20000101T000000Z"}

        def put(item):
            key, data = item
            data = data() if callable(data) else data
            if s3 is not None:
                s3.put_object(Bucket=bucket, Key=key, Body=data)
                return
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection(
                    "127.0.0.1", self.moto_port, timeout=60)
            conn.request("PUT", "/%s/%s" % (bucket, quote(key)), body=data, headers=headers)
            response = conn.getresponse()
            answer = response.read()
            if response.status != 200:
                raise RuntimeError(f"PUT {bucket}/{key}: {response.status} {answer[:500]!r}")

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(put, objects))
