"""How S3 requests are retried (#46): one policy for every request of a read (listings,
HEADs, ranged GETs) and of a write (PUTs, conditional PUTs, GETs, DELETEs, listings,
downloads), applied here rather than by the SDKs.

The SDKs' own retries are off (pyarrow's S3 client makes one try, boto3's too): pyarrow
can only be told how many tries its AWS SDK makes, not how long it waits between them,
and its waits, botocore's 50 ms base for 500s and resets, and this module's former
50 ms base for error answers too long for their buffer all fit several retries in under a
second, which a burst of throttling outlasts. Every request goes through `Request.call`:

* A try that fails with a transient fault (`describe_fault`: 503 SlowDown, 500, other 5xx,
  a reset or refused connection, a timeout, an answer cut short) is tried again after an
  exponential backoff with full jitter, as the AWS SDKs wait: a random time up to
  BACKOFF_BASE_S * 2^(retry - 1), at most BACKOFF_CAP_S.
* A request stops being retried when it has made `store.maxAttempts` tries or when
  `store.retryTimeout` seconds have passed since its first try failed (the last wait is
  cut to end at that time, and one more try is made then); it then fails with a
  StoreError naming the object, the last fault, the tries and the seconds spent since
  its first try (`Exhausted`). A try under way is not cut off by the budget:
  `store.readTimeout` ends a silent one, so a stalled first try still gets its retries.
* Other errors (a missing object, refused credentials, a 412) are raised at once for
  the caller to name.
* Throttling answers (5xx, error answers, reset connections) also slow the process's own
  requests to that store down, as the SDKs' adaptive mode does: a `Limiter` per store
  settings lets fewer requests be in flight at once (halved, down to one, at each such
  answer) and lets more through again as tries succeed (one more per `limit` successes,
  the additive increase of TCP's congestion window). A request waits for a place before
  each try; a request in its backoff holds none.

Stores other than S3 retry as their own client libraries do (resolve.py refuses the
retry options for them).
"""
import contextlib
import random
import re
import threading
import time
from typing import Callable, Dict, Optional, Tuple, TypeVar

from ..errors import StoreError
from .config import StoreConfig

BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 5.0
# Requests to one store in flight at once from a process, before any throttling: above
# what a process makes (a read's index reads eight at a time, each split's chunk and its
# two fetched ahead), so that a store that never throttles never makes one wait.
MAX_IN_FLIGHT = 64

T = TypeVar("T")


def backoff_s(retry: int) -> float:
    """Seconds to wait before retry number `retry` (1 for the first): full jitter."""
    return random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (retry - 1)))


# (pattern in an SDK's error text, the fault it shows, whether it is the store pushing
# back): pyarrow's AWS SDK names errors like SLOW_DOWN or "HTTP status 503" and curl's
# codes; botocore "(SlowDown)" and its exception names.
_FAULTS = [
    (re.compile(r"Failed to flush response stream"),
     "an error answer longer than the bytes asked (its status unknown)", True),
    (re.compile(r"SLOW_DOWN|\(SlowDown\)"), "503 SlowDown", True),
    (re.compile(r"SERVICE_UNAVAILABLE|HTTP status 503|\((ServiceUnavailable|503)\)"),
     "503 ServiceUnavailable", True),
    (re.compile(r"INTERNAL_FAILURE|HTTP status 500|\((InternalError|500)\)"),
     "500 InternalError", True),
    (re.compile(r"HTTP status (5\d\d)|\((5\d\d)\)"), "{} server error", True),
    (re.compile(r"curlCode: 18\b|partial file|IncompleteRead|XML_ERROR_PARSING|cut short",
                re.I), "response cut short", False),
    (re.compile(r"did not match calculated checksum"), "body failed its checksum", False),
    (re.compile(r"curlCode: 56\b|reset by peer|Connection reset|ConnectionResetError|"
                r"Connection was closed|Connection broken|RemoteDisconnected", re.I),
     "connection reset", True),
    (re.compile(r"curlCode: 28\b|Timeout was reached|Read timeout|ReadTimeout|timed out",
                re.I), "timed out", False),
    (re.compile(r"curlCode: 7\b|Could not connect|Failed to connect|Couldn't connect|"
                r"Connection refused|EndpointConnectionError", re.I), "cannot connect", False),
]


def classify(detail: str) -> Optional[Tuple[str, bool]]:
    """(the transient fault an SDK's error text shows, whether it is throttling), None
    for other errors (credentials, a missing object, a failed condition, ...)."""
    for pattern, fault, throttles in _FAULTS:
        match = pattern.search(detail)
        if match is not None:
            groups = [group for group in match.groups() if group]
            return (fault.format(groups[-1]) if "{}" in fault else fault), throttles
    return None


def describe_fault(detail: str) -> Optional[str]:
    """The transient fault an SDK's error text shows (a throttled, failing, cut-off or
    silent store), None for other errors (credentials, a missing object, ...)."""
    found = classify(detail)
    return found[0] if found is not None else None


def describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


class Limiter:
    """How many requests to one store may be in flight at once from this process: at most
    MAX_IN_FLIGHT, halved (from those in flight, down to one) at each throttling answer,
    one more for every `limit` tries that succeed. A thread that holds a place already
    (a check made inside a try) does not wait for another."""

    def __init__(self, ceiling: int = MAX_IN_FLIGHT):
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self.throttles = 0  # throttling answers seen, for tests and benchmarks
        self.waits = 0  # tries that waited for a place
        self._changed = threading.Condition(threading.Lock())
        self._held = threading.local()

    @contextlib.contextmanager
    def slot(self):
        depth = getattr(self._held, "depth", 0)
        if depth:
            self._held.depth = depth + 1
            try:
                yield
            finally:
                self._held.depth = depth
            return
        with self._changed:
            if self.in_flight >= int(self.limit):
                self.waits += 1
                self._changed.wait_for(lambda: self.in_flight < int(self.limit))
            self.in_flight += 1
        self._held.depth = 1
        try:
            yield
        finally:
            self._held.depth = 0
            with self._changed:
                self.in_flight -= 1
                self._changed.notify_all()

    def throttled(self) -> None:
        with self._changed:
            self.throttles += 1
            self.limit = max(1.0, min(self.limit, float(self.in_flight)) / 2)

    def succeeded(self) -> None:
        with self._changed:
            if self.limit < self.ceiling:
                self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
                self._changed.notify_all()


_limiters: Dict[tuple, Limiter] = {}
_limiters_lock = threading.Lock()


def limiter_for(config: StoreConfig) -> Limiter:
    """The limiter of the store these settings reach, one per process: every reader and
    writer of it shares it."""
    key = (config.endpoint, config.region)
    with _limiters_lock:
        limiter = _limiters.get(key)
        if limiter is None:
            limiter = _limiters[key] = Limiter()
    return limiter


def reset_limiters() -> None:
    """Forget what the stores answered (tests and benchmarks: each run starts afresh)."""
    with _limiters_lock:
        _limiters.clear()


class Exhausted(StoreError):
    """A request whose tries ran out: `fault` (the last), `attempts`, `seconds` since its
    first try."""

    def __init__(self, message: str, fault: str, attempts: int, seconds: float):
        super().__init__(message)
        self.fault, self.attempts, self.seconds = fault, attempts, seconds


class Request:
    """The tries of one request: `call(do)` runs `do` until it returns, raises an error
    that is no transient fault (raised as it is), or the tries run out (Exhausted).
    `attempts`: the tries made so far (more than one: an earlier try may have reached the
    store though its answer was lost)."""

    def __init__(self, config: StoreConfig, where: str, action: str,
                 limiter: Optional[Limiter] = None):
        self.config = config
        self.where, self.action = where, action
        self.limiter = limiter if limiter is not None else limiter_for(config)
        self.attempts = 0
        self.started: Optional[float] = None  # the first try
        self.failed: Optional[float] = None  # the first try's failure

    def call(self, do: Callable[[], T]) -> T:
        while True:
            with self.limiter.slot():
                if self.started is None:
                    self.started = time.monotonic()
                self.attempts += 1
                try:
                    result = do()
                except StoreError:
                    raise  # a request made inside this try ran out of its own tries: final
                except Exception as exc:
                    found = classify(self.config.redact(describe(exc)))
                    if found is None:
                        raise
                    if found[1]:
                        self.limiter.throttled()
                    failure, fault = exc, found[0]
                else:
                    self.limiter.succeeded()
                    return result
            self._wait_or_fail(failure, fault)

    def _wait_or_fail(self, exc: BaseException, fault: str) -> None:
        settings = self.config.retry
        now = time.monotonic()
        if self.failed is None:
            self.failed = now
        retrying = now - self.failed
        if self.attempts >= settings.max_attempts or retrying >= settings.retry_timeout_s:
            raise self.exhausted(exc, fault, now - self.started) from None
        time.sleep(min(backoff_s(self.attempts), settings.retry_timeout_s - retrying))

    def exhausted(self, exc: BaseException, fault: str, elapsed: float) -> Exhausted:
        settings = self.config.retry
        detail = self.config.redact(describe(exc))
        out_of_time = time.monotonic() - self.failed >= settings.retry_timeout_s
        ran_out = f"store.retryTimeout is {settings.retry_timeout_s:g} s" if out_of_time \
            else f"store.maxAttempts is {settings.max_attempts}"
        text = f"{self.where}: {self.action}: {fault} after {self.attempts} attempts in " \
               f"{elapsed:.1f} s ({ran_out}; {detail}). What to do: "
        if fault == "cannot connect":
            text += ("check the endpoint (store.endpoint or AWS_ENDPOINT_URL) and that the "
                     "store can be reached from here")
        else:
            text += ("the store kept failing; try again later, or allow it longer with "
                     f"store.retryTimeout (now {settings.retry_timeout_s:g} s) or "
                     f"store.maxAttempts (now {settings.max_attempts})")
            if fault == "timed out":
                text += f" or store.readTimeout (now {settings.read_timeout_s:g} s)"
        return Exhausted(text, fault, self.attempts, elapsed)
