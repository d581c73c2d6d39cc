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
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

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
        status, sent = None, 0  # None: the exchange broke off before moto answered
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=60)
        try:
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
                status = response.status
                sent = self._forward_response(response)
        finally:
            upstream.close()
            self.server.record(Request(self.command, bucket, key, query,
                                       self.headers.get("Range"), status, sent))

    def _forward_request_body(self, upstream: http.client.HTTPConnection):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            # Copied raw, chunk framing and trailers included: the end of the body is the
            # zero-size chunk and the empty line after its trailers.
            while True:
                size_line = self.rfile.readline()
                upstream.send(size_line)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        trailer = self.rfile.readline()
                        upstream.send(trailer)
                        if trailer in (b"\r\n", b"\n", b""):
                            return
                self._copy(self.rfile, upstream.send, size + 2)  # data and its CRLF
        else:
            self._copy(self.rfile, upstream.send, int(self.headers.get("Content-Length") or 0))

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

    def __init__(self, enforce_auth: bool = False, startup_timeout: float = 60.0):
        self._requests: list[Request] = []
        self._lock = threading.Lock()
        self._recorded = threading.Condition(self._lock)
        self._in_flight = 0
        self._process = None
        self._proxy = None
        self._workdir = tempfile.mkdtemp(prefix="segmentlog-s3-")
        self.access_key = DEFAULT_ACCESS_KEY
        self.secret_key = DEFAULT_SECRET_KEY
        self.region = REGION
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
        env = dict(os.environ)
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
        """A boto3 S3 client on moto directly: its requests are not counted."""
        return self._boto_client("s3")

    def make_bucket(self, name: str):
        self.client().create_bucket(Bucket=name)

    def upload_tree(self, local_dir, bucket: str, prefix: str = "") -> list[str]:
        """Uploads every file under local_dir as prefix/relative/path; returns the keys.
        Several at a time: a log of a thousand segments is thousands of small objects."""
        from concurrent.futures import ThreadPoolExecutor

        s3 = self.client()  # boto3 clients are safe to share between threads
        uploads = []
        for root, dirs, files in os.walk(local_dir):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                relative = os.path.relpath(path, local_dir).replace(os.sep, "/")
                key = f"{prefix.strip('/')}/{relative}" if prefix.strip("/") else relative
                uploads.append((path, key))

        def put(item):
            path, key = item
            with open(path, "rb") as handle:
                s3.put_object(Bucket=bucket, Key=key, Body=handle.read())

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(put, uploads))
        return [key for _, key in uploads]
