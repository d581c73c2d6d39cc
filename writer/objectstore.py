"""Writing logs into S3 (`s3://bucket/prefix`), where there is no atomic rename.

The local commit protocol (job.py, publish.py, locks.py) renames a staging directory into
place; S3 has no rename. Writes into S3 use conditional object creation instead, and
never modify an object that exists:

Layout under the log dir's prefix while a write runs:

    .segmentlog-lock-<topic>                      one per topic being written
    .segmentlog-staging-<job>/owner.json          who runs the write
    .segmentlog-staging-<job>/task-*.batches      each task's encoded batches
    .segmentlog-staging-<job>/publish/<topic>-<partition>/<segment files>
    .segmentlog-staging-<job>/publish-journal.json  every final object, and its staged copy

Protocol:

1. Lock. A topic lock is an object created with `If-None-Match: *` (412 when it exists),
   holding the job id, the owner (host, pid) and the time. While the job runs, a
   background thread of the driver refreshes each lock every LOCK_TIMEOUT_S / 3 seconds
   with `If-Match: <its ETag>`. A lock whose object is older than LOCK_TIMEOUT_S (the
   store's own clock: its Last-Modified against the response's Date), or whose owner is
   known dead (same host, pid gone), is stale: it is taken over by a conditional
   overwrite (`If-Match: <the stale ETag>`), so of two writers taking it over at once
   exactly one wins. The winner then finishes the dead job (step 6) before anything else.
2. Tasks encode their rows exactly as a local write does (task.py), into a local
   temporary directory, and upload their staging file into the job's staging prefix when
   they finish; a task that fails deletes what it uploaded.
3. The driver's commit takes the locks of every topic written, reads each partition's
   log end offset over S3 (the reader's PartitionLog), downloads the tasks' files, and
   builds the new segments and indexes with the local engine's code (segments.py,
   assembly.py), so their bytes are the same as a local write's. An append adds segments
   whose base offset is the log end offset; it never touches an existing object, with
   one exception: an empty last segment (every object of it 0 bytes, as a new topic's
   partition without rows gets) has the log end offset as its base offset, and the
   append's first segment replaces it (`If-Match: <its ETag>`, the `.log` first: an index
   with entries past the end of its log would be corrupt, an empty index never is).
4. Every new object is uploaded to the staging prefix, then the journal object lists
   them all with their final keys, in publishing order.
5. Publishing uploads each object again to its final key with `If-None-Match: *`,
   metadata `segmentlog-job: <job>` marking it as this job's: per partition, segment by
   segment, each segment's `.index` and `.timeindex` before its `.log` (readers find
   segments by their `.log`). A clash (412: a writer that ignores the locks) undoes what
   this job published and fails with ConcurrentWriteError; so does any other error. The
   upload is from the local copy, not a server-side copy: S3 servers differ in whether
   CopyObject honours `If-None-Match` for its destination (moto does not).
6. A writer killed while publishing leaves its journal and its (soon stale) locks. The
   next writer that takes such a lock, or that finds a stale lock when it opens the log
   dir, rolls the publish forward from the journal: an object already at its final key
   with the dead job's mark is done, a missing one is copied from the staging prefix.
   Then it deletes the dead job's staging prefix and its other locks. A job killed
   before its journal was complete published nothing; its staging prefix is removed
   the same way. A write killed before it locked anything (its tasks' uploads only)
   leaves a staging prefix that readers skip; the next write removes it when its
   owner.json names a process on the same host that is gone (one on another host stays).

Under Spark the writer is built (and takes the `topic` option's lock) in one Python
worker and commits in another, so a lock is recognised as the job's by the job id it
holds, and each refresh and release is a compare-and-swap on the ETag just read.

What a concurrent reader sees: the commit whole or not at all (format/pending.py). The
journal object lists every final key; a reader that finds it skips those keys until it
is deleted with the staging prefix, after the last PUT. The log dir's publish token
(`.segmentlog-publishing`) is PUT after the journal and before the first final object,
so a reader whose listing a publish overlaps sees the token change and lists again. A
killed job's objects stay hidden until the next writer rolls its publish forward.

Refused: overwrite mode (no atomic replace of a partition on an object store: write to
a new prefix instead), streaming writes into a store, and stores other than S3 (gs://,
abfs://, hdfs://, fsspec's), which have no conditional create here. The protocol needs a
store that enforces `If-None-Match: *` on PUT and `If-Match` on PUT and DELETE: AWS S3
(since 2024), MinIO, moto. A store that silently ignores them cannot be told apart
cheaply; on such a store two concurrent writers could both succeed.

Credentials come from the store.* options when given, else from boto3's default chain in
each process; the endpoint and region are settled on the driver (StoreConfig.settled).
No secret appears in an error message or a repr.
"""
import hashlib
import json
import os
import posixpath
import re
import shutil
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from ..errors import CorruptLogError, InvalidOptionError, SegmentLogError, StoreError
from ..format.log import INDEX_SUFFIX, LOG_SUFFIX, SEGMENT_NAME, TIME_INDEX_SUFFIX, \
    TXN_INDEX_SUFFIX, PartitionLog, parse_partition_dir_name, partition_dir_name, \
    segment_file_name
from ..format.pending import JOURNAL, PUBLISH_TOKEN  # readers rely on them too
from ..storage import STORE_OPTIONS, StoreConfig, refuse_glob, resolve
from ..storage.remote import store_error
from ..storage.retry import Request, describe as _describe
from ..storage.resolve import is_remote_uri

from . import framed
from .assembly import StagedBatches, write_segment
from .errors import ConcurrentWriteError, InvalidInputError, TopicLayoutError, \
    WriteAbortedError, WriteError
from .framed import SCHEMAS_TOPIC, FramingPlan
from .job import DEFAULT_LEADER_EPOCH, MODES, SCHEMAS_TASK_INDEX, CommitSummary, \
    PartitionSummary, schemas_task_spec, settled_partition_count, staged
from .lockfiles import owner_alive, owner_info
from .logdir import LOCK_PREFIX, STAGING_PREFIX, check_num_partitions, partition_count, \
    validate_topic_name
from .options import WriteOptions
from .publish import KILL_HOOK
from .segments import SegmentPlan, plan_segments
from .task import TaskResult, TaskSpec, TaskWriter, results_to_commit

LOCK_TIMEOUT_S = 600.0  # a lock not refreshed for this long belongs to a dead writer
OWNER = "owner.json"
JOB_METADATA = "segmentlog-job"  # on every published object: which job put it there
WRITABLE_SCHEMES = ("s3", "s3a")
_JOB_ID = re.compile(r"^[A-Za-z0-9._-]+$")
INSTALL_HINT = 'pip install "segmentlog[s3]"'


def store_scheme(path) -> Optional[str]:
    """The URI scheme of a store path, None for local paths and file: URIs."""
    if not is_remote_uri(path):
        return None
    return str(path).split(":", 1)[0].lower()


def refuse_unwritable_store(path, what: str = "writing") -> None:
    """Stores other than S3 cannot be written: no conditional create to build a commit on."""
    scheme = store_scheme(path)
    if scheme is not None and scheme not in WRITABLE_SCHEMES:
        raise InvalidOptionError(
            f"option 'path' is {path!r}: {what} into {scheme}:// stores is not supported. "
            f"A segmentlog commit on an object store needs conditional creation of objects "
            f"(If-None-Match), which segmentlog uses only on S3 (and S3-compatible servers); "
            f"{scheme}:// has no atomic rename or conditional create here. Write to a local "
            f"path or an s3:// path", "path")


def refuse_stream_into_store(path) -> None:
    if store_scheme(path) is not None:
        raise InvalidOptionError(
            f"option 'path' is {path!r}: the streaming sink writes local (or mounted) log "
            f"dirs only; its exactly-once record of micro-batches has no object-store "
            f"protocol. Stream into a local path, or write each micro-batch with "
            f"foreachBatch(lambda df, _: df.write.format('segmentlog').save({path!r}))",
            "path")


# ------------------------------------------------------------------------ S3 access

_clients: Dict[StoreConfig, object] = {}
_clients_lock = threading.Lock()


@dataclass(frozen=True)
class S3Target:
    """Where a log dir lives in S3; picklable (the client is built in each process)."""

    uri: str  # s3://bucket/prefix, no trailing '/'
    bucket: str
    prefix: str  # key prefix of the log dir, '' or ending in '/'
    config: StoreConfig

    @classmethod
    def parse(cls, uri: str, config: StoreConfig) -> "S3Target":
        rest = uri[len("s3://"):]
        bucket, _, key = rest.partition("/")
        key = key.strip("/")
        return cls(uri, bucket, key + "/" if key else "", config)

    def key(self, *parts: str) -> str:
        return self.prefix + "/".join(parts)

    def uri_of(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    @property
    def client(self):
        with _clients_lock:
            client = _clients.get(self.config)
            if client is None:
                client = _clients[self.config] = _make_client(self.config)
        return client

    # -- requests, errors named by path, secrets redacted ---------------------------------
    # Every request is one try of boto3's (its retries off) inside a retry.Request, which
    # retries transient faults as the reader's requests are (storage/retry.py); a 412
    # after a retry, a GET's body and a download are handled here (see _landed, get).
    def error(self, key: str, action: str, exc: BaseException) -> StoreError:
        return store_error(self.uri_of(key), action, exc, self.config)  # the reader's words

    def request(self, key: str, action: str) -> Request:
        return Request(self.config, self.uri_of(key), action)

    def put(self, key: str, body, *, create: bool = False, if_match: Optional[str] = None,
            job: Optional[str] = None) -> Optional[str]:
        """Upload; the new ETag, or None when the condition failed (412)."""
        kwargs = {"Bucket": self.bucket, "Key": key, "Body": body}
        if create:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        if job is not None:
            kwargs["Metadata"] = {JOB_METADATA: job}

        def attempt():
            if hasattr(body, "seek"):
                body.seek(0)  # a retry sends the whole body again
            return self.client.put_object(**kwargs)["ETag"]

        request = self.request(key, "cannot write")
        try:
            return request.call(attempt)
        except StoreError:
            raise
        except Exception as exc:
            if _status(exc) in (412, 409) or (if_match and _status(exc) == 404):
                if request.attempts > 1:  # an earlier try may have written it, its answer lost
                    landed = self._landed(key, body, job)
                    if landed is not None:
                        return landed
                return None  # 409: a conditional write raced another one on this key
            raise self.error(key, "cannot write", exc) from None

    def _landed(self, key: str, body, job: Optional[str]) -> Optional[str]:
        """The ETag of the object at `key` when it is what this PUT uploads, else None:
        a retried conditional PUT whose earlier try was written (the answer lost) gets
        412, which is then no clash. A job's objects are told by their job mark, others
        by their bytes (the ETag of a single PUT is its MD5; else the bytes compared)."""
        head = self.head(key)
        if head is None:
            return None
        if job is not None:
            return head["ETag"] if head.get("Metadata", {}).get(JOB_METADATA) == job else None
        if hasattr(body, "read"):
            body.seek(0)
            body = body.read()
        if head["ETag"].strip('"') == hashlib.md5(body, usedforsecurity=False).hexdigest():
            return head["ETag"]
        if head.get("ContentLength") == len(body):
            found = self.get(key)
            if found is not None and found == (body, head["ETag"]):
                return head["ETag"]
        return None

    def put_file(self, key: str, path: str, **kwargs) -> Optional[str]:
        with open(path, "rb") as body:
            return self.put(key, body, **kwargs)

    def get(self, key: str) -> Optional[Tuple[bytes, str]]:
        """(bytes, ETag), None when there is no such object. The body is read inside the
        try: one cut off, reset or stalled is a fault the request is retried for."""
        from botocore.exceptions import BotoCoreError

        def attempt():
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            try:
                data = response["Body"].read()
            except (BotoCoreError, OSError) as exc:  # botocore's or the socket's words
                raise _BodyBroken(f"response cut short: the body broke off "
                                  f"({_describe(exc)})") from exc
            if len(data) != response["ContentLength"]:
                raise _BodyBroken(f"response cut short: {len(data)} of "
                                  f"{response['ContentLength']} bytes")
            return data, response["ETag"]

        try:
            return self.request(key, "cannot read").call(attempt)
        except StoreError:
            raise
        except Exception as exc:
            if _status(exc) == 404:
                return None
            raise self.error(key, "cannot read", exc) from None

    def download(self, key: str, path: str) -> None:
        """One try of s3transfer's per request: a body that breaks off, fails its
        checksum (a well-formed answer cut short) or any other fault makes the download
        again."""
        from boto3.exceptions import RetriesExceededError
        from boto3.s3.transfer import TransferConfig

        transfer = TransferConfig(num_download_attempts=1)

        def attempt():
            try:
                self.client.download_file(self.bucket, key, path, Config=transfer)
            except RetriesExceededError as exc:  # "Max Retries Exceeded" of its one try
                raise exc.last_exception from exc

        try:
            self.request(key, "cannot download").call(attempt)
        except StoreError:
            raise
        except Exception as exc:
            raise self.error(key, "cannot download", exc) from None

    def head(self, key: str) -> Optional[dict]:
        try:
            return self.request(key, "cannot look up").call(
                lambda: self.client.head_object(Bucket=self.bucket, Key=key))
        except StoreError:
            raise
        except Exception as exc:
            if _status(exc) == 404:
                return None
            raise self.error(key, "cannot look up", exc) from None

    def delete(self, key: str, if_match: Optional[str] = None) -> bool:
        """False when `if_match` no longer matches (someone else's object now)."""
        kwargs = {"Bucket": self.bucket, "Key": key}
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        request = self.request(key, "cannot delete")
        try:
            request.call(lambda: self.client.delete_object(**kwargs))
            return True
        except StoreError:
            raise
        except Exception as exc:
            if _status(exc) == 404 and if_match is not None and request.attempts > 1:
                return True  # an earlier try deleted it, its answer lost
            if _status(exc) in (412, 404):
                return False
            raise self.error(key, "cannot delete", exc) from None

    def list(self, prefix: str, delimiter: Optional[str] = None) -> Tuple[List[str], List[str]]:
        """(keys, common prefixes) under `prefix`, page by page (each page a request)."""
        keys, prefixes = [], []
        kwargs = {"Bucket": self.bucket, "Prefix": prefix}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        try:
            while True:
                page = self.request(prefix, "cannot list").call(
                    lambda: self.client.list_objects_v2(**kwargs))
                keys.extend(item["Key"] for item in page.get("Contents", ()))
                prefixes.extend(item["Prefix"] for item in page.get("CommonPrefixes", ()))
                if not page.get("IsTruncated"):
                    break
                kwargs["ContinuationToken"] = page["NextContinuationToken"]
        except StoreError:
            raise
        except Exception as exc:
            raise self.error(prefix, "cannot list", exc) from None
        return keys, prefixes

    def delete_prefix(self, prefix: str) -> None:
        keys, _ = self.list(prefix)
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": key} for key in keys[start:start + 1000]]
            try:
                self.request(prefix, "cannot delete").call(
                    lambda: self.client.delete_objects(
                        Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True}))
            except StoreError:
                raise
            except Exception as exc:
                raise self.error(prefix, "cannot delete", exc) from None


class _BodyBroken(OSError):
    """A GET's body that broke off or came short after a good status: a fault retried
    as "response cut short"."""


def _status(exc: BaseException) -> Optional[int]:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None


def _make_client(config: StoreConfig):
    try:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
    except ImportError:
        raise WriteError(
            f"writing into s3:// needs boto3, which is not installed: {INSTALL_HINT}"
        ) from None
    endpoint = config.endpoint
    if endpoint and "://" not in endpoint:
        endpoint = "https://" + endpoint
    retry = config.retry
    # One try per request: storage/retry.py retries.
    settings = {"retries": {"mode": "standard", "total_max_attempts": 1},
                "connect_timeout": retry.connect_timeout_s,
                "read_timeout": retry.read_timeout_s}
    if endpoint:  # S3-compatible servers are addressed by path
        settings["s3"] = {"addressing_style": "path"}
    if config.anonymous:
        settings["signature_version"] = UNSIGNED
    kwargs = {"region_name": config.region or "us-east-1", "config": Config(**settings)}
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    if config.access_key_id:
        kwargs.update(aws_access_key_id=config.access_key_id,
                      aws_secret_access_key=config.secret_access_key,
                      aws_session_token=config.session_token)
    try:
        return boto3.session.Session().client("s3", **kwargs)
    except Exception as exc:
        raise StoreError(f"s3://: cannot set up the S3 client: "
                         f"{config.redact(str(exc))}") from None


# -------------------------------------------------------------------------- locks

def _lock_body(job_id: str, mode: str, under_jvm: bool) -> bytes:
    return json.dumps({"job": job_id, "mode": mode, "time": time.time(),
                       "owner": owner_info(under_jvm)}).encode()


def _server_age(head: dict) -> float:
    """Seconds since the object was last written, by the store's clock."""
    date = head.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    now = parsedate_to_datetime(date).timestamp() if date else time.time()
    return now - head["LastModified"].timestamp()


class _LockKeeper:
    """The locks a job holds, refreshed in the background. Picklable: under Spark the
    writer takes its locks in one Python worker and commits in another, so a lock is
    known as this job's by the job id inside it, and every refresh and release is a
    compare-and-swap on the ETag just read."""

    def __init__(self, target: S3Target, job_id: str, mode: str, under_jvm: bool):
        self.target = target
        self.job_id = job_id
        self.mode = mode
        self.under_jvm = under_jvm
        self.held: List[str] = []
        self.lost: List[str] = []
        self._setup()

    def _setup(self) -> None:
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._refreshed = time.monotonic()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._setup()

    def key(self, topic: str) -> str:
        return self.target.key(LOCK_PREFIX + topic)

    def _body(self) -> bytes:
        return _lock_body(self.job_id, self.mode, self.under_jvm)

    def acquire(self, topic: str, finish_dead: Callable[[str], None]) -> None:
        key = self.key(topic)
        for _ in range(5):
            if self.target.put(key, self._body(), create=True) is None:
                found = self.target.get(key)
                if found is None:
                    continue  # released meanwhile
                holder = _parse_json(found[0])
                head = self.target.head(key)
                if head is None or head["ETag"] != found[1]:
                    continue  # changed meanwhile
                age = _server_age(head)
                if not _stale(holder, age):
                    raise ConcurrentWriteError(
                        f"topic {topic!r} in {self.target.uri} is being written by job "
                        f"{holder.get('job', '?')} (lock {self.target.uri_of(key)}, refreshed "
                        f"{age:.0f} s ago); retry when it is done. A lock not refreshed for "
                        f"{LOCK_TIMEOUT_S:.0f} s is taken over")
                if self.target.put(key, self._body(), if_match=found[1]) is None:
                    continue  # another writer took it over first
                self._hold(topic)
                if holder.get("job"):
                    finish_dead(str(holder["job"]))
                return
            self._hold(topic)
            return
        raise ConcurrentWriteError(
            f"topic {topic!r} in {self.target.uri}: its lock {self.target.uri_of(key)} keeps "
            f"changing hands; retry later")

    def _hold(self, topic: str) -> None:
        with self._guard:
            if topic not in self.held:
                self.held.append(topic)
        self.resume()

    def resume(self) -> None:
        """Refresh the held locks in the background from this process on."""
        if not self.held:
            return
        self._stop.clear()
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._refresh_loop, daemon=True,
                                            name=f"segmentlog-lock-{self.job_id}")
            self._thread.start()

    def _refresh_loop(self) -> None:
        while not self._stop.wait(LOCK_TIMEOUT_S / 3):
            self.refresh()
            if not self.held:
                return

    def _ours(self, topic: str) -> Optional[str]:
        """The lock's ETag while it is this job's, else None."""
        found = self.target.get(self.key(topic))
        if found is None or _parse_json(found[0]).get("job") != self.job_id:
            return None
        return found[1]

    def refresh(self) -> None:
        with self._guard:
            for topic in list(self.held):
                try:
                    for _ in range(3):
                        etag = self._ours(topic)
                        if etag is None:
                            self.lost.append(topic)
                            self.held.remove(topic)
                            break
                        if self.target.put(self.key(topic), self._body(), if_match=etag):
                            break
                except StoreError:
                    continue  # the next round tries again; the lock is not yet stale
            self._refreshed = time.monotonic()

    def refresh_if_due(self) -> None:
        if time.monotonic() - self._refreshed > LOCK_TIMEOUT_S / 3:
            self.refresh()

    def check(self) -> None:
        """Raise if a lock was taken over (this job was thought dead)."""
        if self.lost:
            raise ConcurrentWriteError(
                f"the lock of topic(s) {sorted(set(self.lost))} in {self.target.uri} was taken "
                f"over by another writer while this write ran (it was not refreshed for "
                f"{LOCK_TIMEOUT_S:.0f} s)")

    def abandon(self) -> None:
        """Stop refreshing and forget the locks, leaving them to go stale: the next
        writer then finishes this job from its journal."""
        self._stop.set()
        with self._guard:
            self.held.clear()

    def release(self, topic: Optional[str] = None) -> None:
        with self._guard:
            for name in [topic] if topic is not None else list(self.held):
                if name not in self.held:
                    continue
                self.held.remove(name)
                etag = self._ours(name)
                if etag is not None:
                    self.target.delete(self.key(name), if_match=etag)
            if not self.held:
                self._stop.set()


def _parse_json(data: bytes) -> dict:
    try:
        content = json.loads(data.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


def _stale(holder: dict, age: float) -> bool:
    if age > LOCK_TIMEOUT_S:
        return True
    owner = holder.get("owner")
    return isinstance(owner, dict) and owner_alive(owner) is False


# ----------------------------------------------------------------- task side

class ObjectStoreTaskWriter:
    """A TaskWriter encoding into a local temporary directory; `finish` uploads its file
    into the job's staging prefix."""

    def __init__(self, spec: TaskSpec, target: S3Target, staging_key: str, task_index: int,
                 attempt: int):
        self.target = target
        self.staging_key = staging_key
        self.local_dir = tempfile.mkdtemp(prefix="segmentlog-task-")
        self.job_spec = spec
        # one file per task: it is uploaded whole
        self.task = TaskWriter(replace(spec, staging_dir=self.local_dir), task_index, attempt,
                               file_per_partition=False)
        self.uploaded: Optional[str] = None

    def write(self, data) -> None:
        # the engine plans the framing when its first rows come, after this task began
        self.task.spec.framing = self.job_spec.framing
        self.task.write(data)

    def finish(self) -> TaskResult:
        try:
            result = self.task.finish()
            if result.file is not None:
                key = self.staging_key + result.file
                if self.target.put_file(key, os.path.join(self.local_dir, result.file),
                                        create=True) is None:
                    raise ConcurrentWriteError(f"{self.target.uri_of(key)} already exists")
                self.uploaded = key
            return result
        finally:
            shutil.rmtree(self.local_dir, ignore_errors=True)

    def discard(self) -> None:
        try:
            self.task.discard()
        finally:
            shutil.rmtree(self.local_dir, ignore_errors=True)
            if self.uploaded is not None:
                self.target.delete(self.uploaded)
                self.uploaded = None


# ------------------------------------------------------------------- job side

@dataclass(frozen=True)
class PublishEntry:
    final_key: str
    staged_key: str
    path: str  # the local copy
    replaces: Optional[str]  # ETag of the empty object it replaces; None: a new object


class ObjectStoreWriteJob:
    """WriteJob's counterpart for a log dir in S3 (see the module docstring); the same
    methods: start, task_writer, commit, abort. Picklable once started."""

    def __init__(self, logdir: str, *, mode: str = "append", topic: Optional[str] = None,
                 options: Optional[WriteOptions] = None, layout=None,
                 write_time_ms: Optional[int] = None, under_jvm: bool = False,
                 store_config: Optional[StoreConfig] = None):
        if mode not in MODES:
            raise InvalidOptionError(
                f"save mode {mode!r} is not supported; segmentlog writes take 'append' or "
                f"'overwrite'")
        refuse_glob(logdir)
        refuse_unwritable_store(logdir)
        if mode == "overwrite":
            raise InvalidOptionError(
                f"save mode 'overwrite' into {logdir!r} is refused: an object store has no "
                f"atomic replace, so readers would see the old and new logs mixed, or none, "
                f"while it ran, and a failure would lose both. Write to a new prefix (and "
                f"switch readers to it), or append", "mode")
        store, uri = resolve(logdir, store_config, "path")
        if not uri[len("s3://"):].strip("/"):
            raise InvalidOptionError(f"option 'path' is {logdir!r}: name a bucket", "path")
        self.store = store
        self.target = S3Target.parse(uri, store.config)
        self.logdir = uri
        self.mode = mode
        self.topic = validate_topic_name(topic) if topic is not None else None
        self.options = options or WriteOptions()
        for option, value in (("leaderEpoch", self.options.leader_epoch),
                              ("topicId", self.options.topic_id)):
            if value is not None:
                raise InvalidOptionError(
                    f"option {option!r} is refused for a write into {logdir!r}: a write into "
                    f"an object store leaves segments only, no leader-epoch-checkpoint or "
                    f"partition.metadata to hold it", option)
        self.layout = layout
        self.write_time_ms = int(time.time() * 1000) if write_time_ms is None else write_time_ms
        self.job_id = time.strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:12]
        self.staging_key = self.target.key(STAGING_PREFIX + self.job_id) + "/"
        self.under_jvm = under_jvm
        self.locks = _LockKeeper(self.target, self.job_id, mode, under_jvm)
        self.started = False
        self.finished = False

        self.recover_dead_publishes()
        self.existing_partitions = self._list_topics()
        self.spec = TaskSpec(self.job_id, uri, "", mode, self.options, self.topic,
                             self.existing_partitions, self.write_time_ms, layout)
        self._schemas_spec: Optional[TaskSpec] = None  # set when the commit registers
        if self.topic is not None:
            self._check_topic_at_start(self.topic)
        if layout is not None:
            self.plan_framing(layout)

    def plan_framing(self, layout) -> Optional[FramingPlan]:
        """WriteJob.plan_framing's: the framed columns' schema ids against the log dir's
        `_schemas` partition in the store now; the commit confirms them."""
        if not self.options.framed_sides:
            return None
        planned = self.spec.framing
        if planned is None:
            self.spec.framing = framed.plan_framing(self.options, self.topic, self.logdir,
                                                    layout.framed_types, self.store)
        elif layout.framed_types != planned.column_types:
            raise InvalidInputError(
                f"the framed columns have types {layout.framed_types}; this write's schemas "
                f"were planned for {planned.column_types}")
        return self.spec.framing

    def __getstate__(self):
        state = dict(self.__dict__)
        return state

    # -------------------------------------------------------------- inspection
    def _listing(self):
        tree = self.store.tree(self.logdir)
        names = tree.names(self.logdir) if tree.isdir(self.logdir) else []
        return tree, names

    def _list_topics(self, listing=None) -> Dict[str, List[int]]:
        tree, names = listing or self._listing()
        if any(SEGMENT_NAME.match(name) for name in names):
            raise InvalidOptionError(
                f"{self.logdir} holds segment objects: it is a partition directory, not a log "
                f"dir. Write to the prefix that holds the <topic>-<partition> directories "
                f"({posixpath.dirname(self.logdir)})", "path")
        topics: Dict[str, List[int]] = {}
        for name in names:
            parsed = parse_partition_dir_name(name) if not name.startswith(".") else None
            if parsed is not None and tree.isdir(self.store.join(self.logdir, name)):
                topics.setdefault(parsed[0], []).append(parsed[1])
        for partitions in topics.values():
            partitions.sort()
        return topics

    def _tail(self, topic: str, partition: int, tree=None) -> Tuple[int, int, Dict[str, str]]:
        """(log end offset, leader epoch of the last batch or -1, {file name: ETag} of an
        empty last segment at the log end offset, which the append replaces)."""
        directory = self.store.join(self.logdir, partition_dir_name(topic, partition))
        try:
            log = PartitionLog.open(directory, self.store, tree)
            if not log.segments:
                return 0, -1, {}
            epoch, end = -1, None
            for segment in reversed(log.segments):
                last = segment.last_entry(allow_torn_tail=False, verify=True)
                if last is not None:
                    epoch = last.partition_leader_epoch if last.magic == 2 else -1
                    if end is None:
                        end = last.last_offset + 1
                    break
                if end is None:
                    end = segment.base_offset  # an empty last segment: its base offset
        except CorruptLogError as exc:
            raise TopicLayoutError(
                f"cannot append to {directory}: its last segment does not end with a complete, "
                f"undamaged batch ({exc}); restore or recover the partition first") from exc
        except StoreError:
            raise
        except SegmentLogError as exc:
            raise TopicLayoutError(f"cannot append to {directory}: {exc}") from exc
        empty = {}
        last_segment = log.segments[-1]
        if last_segment.size == 0 and last_segment.base_offset == end:
            for name in _segment_files(end) + [segment_file_name(end, TXN_INDEX_SUFFIX)]:
                head = self.target.head(self.target.key(partition_dir_name(topic, partition),
                                                        name))
                if head is None:
                    continue
                if head["ContentLength"] != 0:
                    raise TopicLayoutError(
                        f"cannot append to {directory}: its last segment is empty but its "
                        f"{name} is {head['ContentLength']} bytes; an append replaces an empty "
                        f"segment only when all its objects are empty")
                empty[name] = head["ETag"]
        return end, epoch, empty

    def _check_topic_at_start(self, topic: str) -> None:
        count = self.spec.partition_count(topic)
        existing = self.existing_partitions.get(topic)
        if count is None and not (self.layout is not None and self.layout.has_partition):
            raise InvalidOptionError(
                f"topic {topic!r} does not exist in {self.logdir}: set the 'numPartitions' "
                f"option to create it")
        if existing:
            tree = self.store.tree(self.logdir)
            for partition in existing:
                self._tail(topic, partition, tree)

    # -------------------------------------------------------------- lifecycle
    def start(self) -> "ObjectStoreWriteJob":
        if self.finished:
            raise WriteAbortedError(f"write {self.job_id} has already been committed or aborted")
        if self.started:
            raise WriteError(f"write {self.job_id} has already been started")
        self.started = True
        try:
            if self.topic is not None:
                self.locks.acquire(self.topic, self._finish_dead_job)
            self.target.put(self.staging_key + OWNER, json.dumps(
                {"job": self.job_id, "owner": owner_info(self.under_jvm),
                 "time": time.time()}).encode(), create=True)
        except BaseException:
            self.abort()
            raise
        return self

    def task_writer(self, task_index: int = 0, attempt: int = 0) -> ObjectStoreTaskWriter:
        if self.finished:
            raise WriteAbortedError(f"write {self.job_id} has already been committed or aborted")
        if not self.started:
            raise WriteError(f"write {self.job_id} has not been started: call start() first")
        return ObjectStoreTaskWriter(self.spec, self.target, self.staging_key, task_index,
                                     attempt)

    def abort(self) -> None:
        """Forget the write: delete its staging prefix and release its locks."""
        self.finished = True
        try:
            self.target.delete_prefix(self.staging_key)
        finally:
            self.locks.release()

    # ----------------------------------------------------------------- commit
    def commit(self, results: Iterable[Optional[TaskResult]], *,
               before_publish: Optional[Callable[[CommitSummary], None]] = None,
               after_publish: Optional[Callable[[CommitSummary], None]] = None) -> CommitSummary:
        if self.finished:
            raise WriteAbortedError(f"write {self.job_id} has already been committed or aborted")
        if not self.started:
            raise WriteError(f"write {self.job_id} has not been started: call start() first")
        framing = self.spec.framing
        ordered, topics = results_to_commit(results, self.job_id, self.topic,
                                            bool(self.options.framed_sides), framing)
        published: List[Tuple[PublishEntry, str]] = []  # with the ETag each one got
        self.locks.resume()
        try:
            # A framed write reads and may append to `_schemas`: its lock keeps two writes
            # from giving out one id.
            for topic in sorted(topics | ({SCHEMAS_TOPIC} if framing is not None else set())):
                if topic not in self.locks.held:
                    self.locks.acquire(topic, self._finish_dead_job)
            if framing is not None:
                registering = self._schema_records(framing)
                if registering:
                    ordered = ordered + registering
                    topics.add(SCHEMAS_TOPIC)
            with tempfile.TemporaryDirectory(prefix="segmentlog-commit-") as work:
                summary, entries = self._assemble(ordered, sorted(topics), work)
                for entry in entries:
                    self.target.put_file(entry.staged_key, entry.path)
                self.locks.refresh()  # every lock read back: still this job's
                self.locks.check()
                journal = {"job": self.job_id, "topics": sorted(topics),
                           "objects": [[e.final_key, e.staged_key, e.replaces]
                                       for e in entries]}
                self.target.put(self.staging_key + JOURNAL, json.dumps(journal).encode())
                # after the journal, before the first final object: a reader's listing
                # that this publish overlaps sees the token change (format/pending.py)
                self.target.put(self.target.key(PUBLISH_TOKEN), json.dumps(
                    {"job": self.job_id, "token": uuid.uuid4().hex}).encode())
                if before_publish is not None:
                    before_publish(summary)
                self._publish(entries, published)
            self.finished = True
        except BaseException:
            if self._undo(published):
                try:
                    self.abort()
                except StoreError:
                    pass  # the error that failed the commit says more
            else:  # published objects stay: the next writer rolls the journal forward
                self.finished = True
                self.locks.abandon()
            raise
        try:
            try:
                self.target.delete_prefix(self.staging_key)
            except StoreError:
                pass  # published already; readers skip the leftover staging prefix
            if after_publish is not None:
                after_publish(summary)
        finally:
            self.locks.release()
        return summary

    def _publish(self, entries, published) -> None:
        hook = os.environ.get(KILL_HOOK)
        kill_at = int(hook) if hook and hook.strip().isdigit() else None
        for number, entry in enumerate(entries, 1):
            etag = self.target.put_file(entry.final_key, entry.path, create=entry.replaces is None,
                                        if_match=entry.replaces, job=self.job_id)
            if etag is None:
                raise ConcurrentWriteError(
                    f"{self.target.uri_of(entry.final_key)} appeared or changed while this write "
                    f"ran: another writer (one that ignores segmentlog's locks) wrote the same "
                    f"segment; this write was undone")
            published.append((entry, etag))
            if kill_at is not None and number == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            self.locks.refresh_if_due()
            self.locks.check()

    def _undo(self, published) -> bool:
        """Delete this job's published objects, every `.log` first (a segment without its
        `.log` is invisible); False when some could not be deleted."""
        order = sorted(reversed(published), key=lambda item: not item[0].final_key.endswith(".log"))
        for entry, etag in order:
            try:
                if entry.replaces is None:
                    done = self.target.delete(entry.final_key, if_match=etag)
                else:  # it replaced an empty object: empty it again
                    done = self.target.put(entry.final_key, b"", if_match=etag) is not None
            except StoreError:
                return False
            if not done:
                return False
        return True

    def _assemble(self, ordered: List[TaskResult], topics: List[str], work: str):
        """Build every new segment locally: (summary, what to publish, in order)."""
        staging = os.path.join(work, "staging")
        os.makedirs(staging)
        for result in ordered:
            if result.file is not None:
                self.target.download(self.staging_key + result.file,
                                     os.path.join(staging, result.file))
        listing = self._listing()
        now = self._list_topics(listing)
        tree = listing[0]
        summary = CommitSummary(self.logdir, self.mode)
        entries: List[PublishEntry] = []
        for topic in topics:
            count = self._topic_count(topic, ordered)
            existing = now.get(topic, [])
            if existing:
                check_num_partitions(count, topic, partition_count(self.logdir, topic, existing))
            elif topic in self.existing_partitions:
                raise ConcurrentWriteError(
                    f"topic {topic!r} in {self.logdir} was deleted while this write ran; "
                    f"nothing was written")
            for partition in range(count):
                pieces = [(r.file, r.partitions[(topic, partition)]) for r in ordered
                          if (topic, partition) in r.partitions]
                if existing and not pieces:
                    continue
                replaced: Dict[str, str] = {}
                if existing:
                    start, epoch, replaced = self._tail(topic, partition, tree)
                    epoch = DEFAULT_LEADER_EPOCH if epoch < 0 else epoch
                else:
                    start, epoch = 0, DEFAULT_LEADER_EPOCH
                name = partition_dir_name(topic, partition)
                local = os.path.join(work, "publish", name)
                os.makedirs(local)
                batches = StagedBatches.gather(pieces)
                options = self.options
                plans = plan_segments(
                    start, batches.sizes, batches.record_counts, batches.max_timestamps,
                    segment_bytes=options.segment_bytes, segment_ms=options.segment_ms,
                    segment_index_bytes=options.segment_index_bytes,
                    index_interval_bytes=options.index_interval_bytes)
                if not plans:  # a partition of a new topic that got no rows
                    plans = [SegmentPlan(start, 0, 0, 0, start)]
                offsets = batches.base_offsets(start)
                for plan in plans:
                    write_segment(local, plan, staging, batches, offsets, epoch)
                    names = _segment_files(plan.base_offset)
                    if replaced and plan.base_offset == start:
                        # the .log first: an index with entries past its log is corrupt
                        names = names[-1:] + names[:-1]
                    for file_name in names:
                        entries.append(PublishEntry(
                            self.target.key(name, file_name),
                            self.staging_key + f"publish/{name}/{file_name}",
                            os.path.join(local, file_name),
                            replaced.get(file_name) if plan.base_offset == start else None))
                summary.partitions.append(PartitionSummary(
                    topic, partition, start, plans[-1].next_offset,
                    int(batches.record_counts.sum()), [p.base_offset for p in plans]))
        return summary, entries

    def _schema_records(self, framing: FramingPlan) -> List[TaskResult]:
        """Under the `_schemas` lock: the plan confirmed against `_schemas` now, and the
        staged SCHEMA records it registers (WriteJob._schema_records's)."""
        confirmed = framed.confirm_framing(framing, self.options, self.topic, self.logdir,
                                           self.store)
        table = framed.schema_records_table(confirmed)
        if table is None:
            return []
        existing = self._list_topics().get(SCHEMAS_TOPIC, [])
        self._schemas_spec = schemas_task_spec(self.spec, existing, self.logdir)
        return [staged(ObjectStoreTaskWriter(self._schemas_spec, self.target,
                                             self.staging_key, SCHEMAS_TASK_INDEX, 0), table)]

    def _topic_count(self, topic: str, ordered: List[TaskResult]) -> int:
        spec = self._schemas_spec if topic == SCHEMAS_TOPIC and self._schemas_spec else \
            self.spec
        return settled_partition_count(spec, topic, ordered, self.logdir)

    # --------------------------------------------------------------- recovery
    def recover_dead_publishes(self) -> List[str]:
        """Take over every stale lock in the log dir and finish its job; the topics."""
        keys, _ = self.target.list(self.target.key(LOCK_PREFIX))
        recovered = []
        for key in keys:
            topic = key[len(self.target.key(LOCK_PREFIX)):]
            if "/" in topic:
                continue
            found = self.target.get(key)
            head = self.target.head(key) if found is not None else None
            if head is None or head["ETag"] != found[1] or \
                    not _stale(_parse_json(found[0]), _server_age(head)):
                continue
            try:
                self.locks.acquire(topic, self._finish_dead_job)
            except ConcurrentWriteError:
                continue  # taken by a live writer meanwhile: it finishes the dead job
            self.locks.release(topic)
            recovered.append(topic)
        # Staging prefixes of writes killed before they locked anything (tasks' uploads)
        _, prefixes = self.target.list(self.target.key(STAGING_PREFIX), "/")
        for prefix in prefixes:
            found = self.target.get(prefix + OWNER)
            owner = _parse_json(found[0]).get("owner") if found is not None else None
            if isinstance(owner, dict) and owner_alive(owner) is False and \
                    self.target.head(prefix + JOURNAL) is None:
                self.target.delete_prefix(prefix)
        return recovered

    def _finish_dead_job(self, job: str) -> None:
        """Roll a dead job's publish forward from its journal, then delete its staging
        prefix and its other locks. Runs while holding one of its (taken over) locks."""
        if not _JOB_ID.match(job):
            return  # not a job id this module writes: nothing of it to finish
        staging = self.target.key(STAGING_PREFIX + job) + "/"
        found = self.target.get(staging + JOURNAL)
        journal = _parse_json(found[0]) if found is not None else {}
        if found is not None and not isinstance(journal.get("objects"), list):
            # the journal is PUT whole: never guess past one
            # that does not read as such
            raise WriteError(
                f"cannot finish the publish of dead write {job} in {self.logdir}: its journal "
                f"{self.target.uri_of(staging + JOURNAL)} does not read as one; readers skip "
                f"the objects it lists while it is there. Move it aside once you have checked "
                f"which of its objects are complete")
        for final_key, staged_key, replaces in journal.get("objects", []):
            head = self.target.head(final_key)
            if head is not None and not (replaces is not None and head["ETag"] == replaces):
                if head.get("Metadata", {}).get(JOB_METADATA) != job:
                    raise WriteError(
                        f"cannot finish the publish of dead write {job} in {self.logdir}: "
                        f"{self.target.uri_of(final_key)} holds another write's object "
                        f"(changed by hand, or a writer that ignores the locks)")
                continue
            data = self.target.get(staged_key)
            if data is None:
                raise WriteError(
                    f"cannot finish the publish of dead write {job} in {self.logdir}: its "
                    f"staged object {self.target.uri_of(staged_key)} is missing")
            if self.target.put(final_key, data[0], create=replaces is None, if_match=replaces,
                               job=job) is None:
                raise ConcurrentWriteError(
                    f"{self.target.uri_of(final_key)} appeared while the publish of dead write "
                    f"{job} was being finished")
        for topic in journal.get("topics", []):
            if topic in self.locks.held:
                continue
            key = self.target.key(LOCK_PREFIX + topic)
            lock = self.target.get(key)
            if lock is not None and _parse_json(lock[0]).get("job") == job:
                self.target.delete(key, if_match=lock[1])
        self.target.delete_prefix(staging)


def _segment_files(base_offset: int) -> List[str]:
    return [segment_file_name(base_offset, suffix)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)]


# ----------------------------------------------------------------- choosing

STORE_OPTION_NAMES = frozenset(name.lower() for name in STORE_OPTIONS)


def open_write_job(logdir: str, *, store_config: Optional[StoreConfig] = None, **kwargs):
    """A WriteJob for a local log dir, an ObjectStoreWriteJob for an s3:// one; refuses
    other stores."""
    from .job import WriteJob

    if store_scheme(logdir) is not None:
        return ObjectStoreWriteJob(logdir, store_config=store_config, **kwargs)
    if store_config is not None and store_config != StoreConfig():
        raise InvalidOptionError(
            f"the store.* options apply to s3:// paths; {logdir!r} is a local path",
            "store.endpoint")
    return WriteJob(logdir, **kwargs)
