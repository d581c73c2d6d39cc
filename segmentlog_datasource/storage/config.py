"""Store settings given as options: endpoint, region, anonymous access, credentials, and
how S3 requests are retried (attempts, the time a request may be retried, timeouts; the
retries themselves: retry.py).

Without options, each process finds credentials the way the AWS (or GCS, Azure) SDK does:
environment variables, config files and profiles (`AWS_PROFILE`), instance roles. The
endpoint and region are settled once, where the read or write is planned, and travel with
the tasks; credentials travel only when given as options.
"""
import math
import os
from dataclasses import dataclass, fields, replace
from typing import Mapping, NamedTuple, Optional, Tuple

from ..errors import InvalidOptionError

# option name -> field
STORE_OPTIONS = {
    "store.endpoint": "endpoint",
    "store.region": "region",
    "store.anonymous": "anonymous",
    "store.accessKeyId": "access_key_id",
    "store.secretAccessKey": "secret_access_key",
    "store.sessionToken": "session_token",
    "store.maxAttempts": "max_attempts",
    "store.connectTimeout": "connect_timeout",
    "store.readTimeout": "read_timeout",
    "store.retryTimeout": "retry_timeout",
}
_SECRET_FIELDS = ("secret_access_key", "session_token")
REDACTED = "*****(redacted)"

# Retries of S3 requests (reads through pyarrow, writes through boto3; retry.py). A
# request is retried until it has made DEFAULT_MAX_ATTEMPTS tries or DEFAULT_RETRY_TIMEOUT_S
# have passed since its first try failed, whichever comes first: with waits of up to
# 0.1, 0.2, 0.4, ... 5 s, 20 tries take about 35 s on average, so the time is what
# usually ends the retries of a store that stays down, and a burst of throttling of
# several seconds is ridden out (a request answered 503 one time in three at random fails
# when about sixteen tries in a row are, before the 30 s run out: 3^-16, about 1e-8).
DEFAULT_MAX_ATTEMPTS = 20  # the first try included
DEFAULT_RETRY_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_READ_TIMEOUT_S = 60.0
MAX_ATTEMPTS_LIMIT = 100
TIMEOUT_LIMIT_S = 3600.0
RETRY_FIELDS = ("max_attempts", "connect_timeout", "read_timeout", "retry_timeout")


class RetrySettings(NamedTuple):
    max_attempts: int  # tries of one request, the first included
    connect_timeout_s: float  # to open a connection
    read_timeout_s: float  # without a byte of the response before the try is abandoned
    retry_timeout_s: float  # no retry starts later than this after the first try failed


@dataclass(frozen=True)
class StoreConfig:
    endpoint: Optional[str] = None  # e.g. http://127.0.0.1:9000 (an S3-compatible server)
    region: Optional[str] = None
    anonymous: bool = False
    access_key_id: Optional[str] = None
    secret_access_key: Optional[str] = None
    session_token: Optional[str] = None
    max_attempts: Optional[int] = None  # None: the defaults above
    connect_timeout: Optional[float] = None
    read_timeout: Optional[float] = None
    retry_timeout: Optional[float] = None

    @property
    def retry(self) -> RetrySettings:
        return RetrySettings(
            self.max_attempts or DEFAULT_MAX_ATTEMPTS,
            self.connect_timeout or DEFAULT_CONNECT_TIMEOUT_S,
            self.read_timeout or DEFAULT_READ_TIMEOUT_S,
            self.retry_timeout or DEFAULT_RETRY_TIMEOUT_S)

    @property
    def has_retry_settings(self) -> bool:
        return any(getattr(self, name) is not None for name in RETRY_FIELDS)

    def __repr__(self):
        shown = []
        for item in fields(self):
            value = getattr(self, item.name)
            if value in (None, False):
                continue
            shown.append(f"{item.name}={REDACTED if item.name in _SECRET_FIELDS else value!r}")
        return "StoreConfig(" + ", ".join(shown) + ")"

    __str__ = __repr__

    @property
    def secrets(self) -> Tuple[str, ...]:
        """Values never to be shown (the access key id too: it names the account)."""
        return tuple(v for v in (self.secret_access_key, self.session_token, self.access_key_id)
                     if v)

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def settled(self, scheme: str) -> "StoreConfig":
        """The endpoint and region from the environment when no option gave them, so that
        executors, whose environment may differ, use what the driver used."""
        if scheme != "s3":
            return self
        endpoint = self.endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or \
            os.environ.get("AWS_ENDPOINT_URL")
        region = self.region or os.environ.get("AWS_REGION") or \
            os.environ.get("AWS_DEFAULT_REGION")
        return replace(self, endpoint=endpoint or None, region=region or None)


def _lookup(options: Mapping, name: str):
    lowered = name.lower()
    for key, value in options.items():
        if str(key).lower() == lowered:
            return value
    return None


def _parse_attempts(name: str, raw, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_ATTEMPTS_LIMIT:
        raise InvalidOptionError.for_value(
            name, raw, f"a whole number of tries from 1 (no retry) to {MAX_ATTEMPTS_LIMIT}")
    return value


def _parse_seconds(name: str, raw, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= TIMEOUT_LIMIT_S:  # also refuses nan
        raise InvalidOptionError.for_value(
            name, raw, f"seconds, more than 0 and at most {TIMEOUT_LIMIT_S:.0f}")
    return value


def parse_store_config(options: Optional[Mapping]) -> StoreConfig:
    options = dict(options or {})
    values = {}
    for name, field_name in STORE_OPTIONS.items():
        raw = _lookup(options, name)
        if raw is None:
            continue
        text = str(raw).strip()
        if field_name == "anonymous":
            if text.lower() not in ("true", "false"):
                raise InvalidOptionError.for_value(name, raw, "true or false")
            values[field_name] = text.lower() == "true"
            continue
        if not text:
            raise InvalidOptionError(f"option {name!r} is empty", name)
        if field_name == "max_attempts":
            values[field_name] = _parse_attempts(name, raw, text)
            continue
        if field_name in ("connect_timeout", "read_timeout", "retry_timeout"):
            values[field_name] = _parse_seconds(name, raw, text)
            continue
        if field_name == "endpoint" and "://" in text and \
                not text.lower().startswith(("http://", "https://")):
            raise InvalidOptionError.for_value(
                name, raw, "a host[:port], or an http:// or https:// URL")
        values[field_name] = text
    if bool(values.get("access_key_id")) != bool(values.get("secret_access_key")):
        given, missing = ("store.accessKeyId", "store.secretAccessKey") \
            if values.get("access_key_id") else ("store.secretAccessKey", "store.accessKeyId")
        raise InvalidOptionError(f"option {given!r} needs {missing!r} too", missing)
    if values.get("anonymous") and values.get("access_key_id"):
        raise InvalidOptionError(
            "options 'store.anonymous' and 'store.accessKeyId' exclude each other",
            "store.anonymous")
    return StoreConfig(**values)
