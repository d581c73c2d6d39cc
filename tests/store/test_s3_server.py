"""The S3 test endpoint (support.s3server): moto behind a counting proxy.

These pin what the object-store tests rely on: pyarrow's S3 filesystem works through the
proxy and every request it makes is recorded (method, key, Range, status, bytes), setup
through the direct endpoint is not, request bodies (chunked too) and keep-alive pass
through, moto enforces `If-None-Match: *` on creates, and `enforce_auth=True` rejects a
wrong secret.
"""
import http.client
import os
import re
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

pafs = pytest.importorskip("pyarrow.fs")
botocore_exceptions = pytest.importorskip("botocore.exceptions")

from support.s3server import S3Server  # noqa: E402


@pytest.fixture
def bucket(s3_server, request):
    """A fresh bucket named after the test; the request log starts empty."""
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:63]
    s3_server.make_bucket(name)
    s3_server.reset_counts()
    return name


def pyarrow_fs(server: S3Server, secret_key: str | None = None):
    return pafs.S3FileSystem(
        endpoint_override=urlsplit(server.endpoint).netloc, scheme="http",
        access_key=server.access_key, secret_key=secret_key or server.secret_key,
        region=server.region)


def proxied_client(server: S3Server, secret_key: str | None = None, access_key: str | None = None):
    """A boto3 client through the proxy: its requests are recorded."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint, region_name=server.region,
        aws_access_key_id=access_key or server.access_key,
        aws_secret_access_key=secret_key or server.secret_key,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def make_tree(root, directories: int, files=("0.log", "0.index", "0.timeindex")) -> dict:
    """directories x files under root, each file's content naming it; returns path -> bytes."""
    contents = {}
    for number in range(directories):
        directory = root / f"topic-{number}"
        directory.mkdir()
        for name in files:
            data = f"{directory.name}/{name}:".encode() * 40
            (directory / name).write_bytes(data)
            contents[f"{directory.name}/{name}"] = data
    return contents


def test_uploads_through_the_direct_endpoint_are_not_counted(s3_server, bucket, tmp_path):
    contents = make_tree(tmp_path, directories=4)

    keys = s3_server.upload_tree(tmp_path, bucket, "logs/root")

    assert sorted(keys) == sorted(f"logs/root/{relative}" for relative in contents)
    assert s3_server.requests() == []
    stored = s3_server.client().get_object(Bucket=bucket, Key="logs/root/topic-2/0.index")
    assert stored["Body"].read() == contents["topic-2/0.index"]


def test_pyarrow_recursive_listing_is_recorded_as_one_list_objects_v2(s3_server, bucket, tmp_path):
    contents = make_tree(tmp_path, directories=50)
    s3_server.upload_tree(tmp_path, bucket, "logs/root")

    infos = pyarrow_fs(s3_server).get_file_info(
        pafs.FileSelector(f"{bucket}/logs/root", recursive=True))

    files = {info.path: info.size for info in infos if info.type == pafs.FileType.File}
    assert files == {f"{bucket}/logs/root/{relative}": len(data)
                     for relative, data in contents.items()}
    # 150 keys fit one page: one flat listing, not one per directory.
    (listing,) = s3_server.requests()
    assert (listing.method, listing.bucket, listing.key, listing.status) == ("GET", bucket, None, 200)
    assert listing.query["list-type"] == "2"
    assert listing.query["prefix"] == "logs/root/"
    assert "delimiter" not in listing.query
    assert listing.response_bytes > 0


def test_pyarrow_read_at_is_recorded_as_head_then_ranged_get(s3_server, bucket, tmp_path):
    make_tree(tmp_path, directories=1)
    s3_server.upload_tree(tmp_path, bucket, "logs")
    key = "logs/topic-0/0.log"
    expected = s3_server.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    with pyarrow_fs(s3_server).open_input_file(f"{bucket}/{key}") as source:
        first = source.read_at(10, 100)
        second = source.read_at(7, 300)

    assert (first, second) == (expected[100:110], expected[300:307])
    requests = s3_server.requests()
    assert [(r.method, r.bucket, r.key, r.range_header, r.status, r.response_bytes)
            for r in requests] == [
        ("HEAD", bucket, key, None, 200, 0),
        ("GET", bucket, key, "bytes=100-109", 206, 10),
        ("GET", bucket, key, "bytes=300-306", 206, 7),
    ]


def test_missing_object_is_recorded_as_a_404_head(s3_server, bucket):
    with pytest.raises(FileNotFoundError):
        pyarrow_fs(s3_server).open_input_file(f"{bucket}/absent")

    assert [(r.method, r.key, r.status) for r in s3_server.requests()] == [
        ("HEAD", "absent", 404)]


def test_pyarrow_multipart_write_passes_through_the_proxy(s3_server, bucket):
    # 6 MiB: more than pyarrow's 5 MiB part, so a multipart upload with a body per part.
    data = bytes(range(256)) * (6 * 1024 * 1024 // 256)

    with pyarrow_fs(s3_server).open_output_stream(f"{bucket}/big.log") as sink:
        sink.write(data)

    assert s3_server.client().get_object(Bucket=bucket, Key="big.log")["Body"].read() == data
    methods = [(r.method, r.status) for r in s3_server.requests()]
    assert methods[0] == ("POST", 200)  # CreateMultipartUpload
    assert ("PUT", 200) in methods
    assert methods[-1] == ("POST", 200)  # CompleteMultipartUpload
    assert all(r.key == "big.log" for r in s3_server.requests())


def test_chunked_body_and_keep_alive_pass_through(s3_server, bucket):
    # Raw HTTP shows the proxy's framing. moto takes an anonymous PUT (no enforce_auth); a
    # GET needs a signature, here in a presigned URL.
    netloc = urlsplit(s3_server.endpoint).netloc
    presigned = urlsplit(proxied_client(s3_server).generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "chunked"}))
    conn = http.client.HTTPConnection(netloc, timeout=30)
    parts = [b"first chunk;", b"x" * 100_000, b";last"]
    conn.request("PUT", f"/{bucket}/chunked", body=iter(parts), encode_chunked=True)
    put = conn.getresponse()
    put.read()
    client_socket = conn.sock

    conn.request("GET", f"{presigned.path}?{presigned.query}", headers={"Range": "bytes=0-10"})
    get = conn.getresponse()
    body = get.read()
    reused = conn.sock is client_socket
    conn.close()

    assert put.status == 200
    assert (get.status, body) == (206, b"first chunk")
    assert reused  # the proxy kept the client connection open between the two
    stored = s3_server.client().get_object(Bucket=bucket, Key="chunked")["Body"].read()
    assert stored == b"".join(parts)
    assert [(r.method, r.range_header, r.status) for r in s3_server.requests()] == [
        ("PUT", None, 200), ("GET", "bytes=0-10", 206)]


def test_put_if_none_match_star_refuses_an_existing_key(s3_server, bucket):
    client = proxied_client(s3_server)
    client.put_object(Bucket=bucket, Key="segment.log", Body=b"first", IfNoneMatch="*")

    with pytest.raises(botocore_exceptions.ClientError) as refused:
        client.put_object(Bucket=bucket, Key="segment.log", Body=b"second", IfNoneMatch="*")

    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert [r.status for r in s3_server.requests()] == [200, 412]
    assert client.get_object(Bucket=bucket, Key="segment.log")["Body"].read() == b"first"


def test_complete_multipart_if_none_match_star_refuses_an_existing_key(s3_server, bucket):
    client = proxied_client(s3_server)

    def complete(key: str, body: bytes):
        upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1,
                                  Body=body)["ETag"]
        client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload, IfNoneMatch="*",
            MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})

    complete("new.log", b"created")
    client.put_object(Bucket=bucket, Key="taken.log", Body=b"already there")
    with pytest.raises(botocore_exceptions.ClientError) as refused:
        complete("taken.log", b"must not replace")

    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3_server.requests()[-1].status == 412
    assert client.get_object(Bucket=bucket, Key="new.log")["Body"].read() == b"created"
    assert client.get_object(Bucket=bucket, Key="taken.log")["Body"].read() == b"already there"


def test_env_points_pyarrow_from_uri_at_the_proxy(s3_server, bucket):
    s3_server.client().put_object(Bucket=bucket, Key="dir/object", Body=b"through the env")
    # A child process: from_uri reads AWS_ENDPOINT_URL and the credentials from its env.
    reader = ("import sys, pyarrow.fs as fs\n"
              "filesystem, path = fs.FileSystem.from_uri(sys.argv[1])\n"
              "sys.stdout.write(filesystem.open_input_file(path).read().decode())\n")
    env = {**os.environ, **s3_server.env()}

    done = subprocess.run([sys.executable, "-c", reader, f"s3://{bucket}/dir/object"],
                          env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "through the env"
    # No region lookup at construction: only the read's HEAD and GET.
    assert [(r.method, r.key) for r in s3_server.requests()] == [
        ("HEAD", "dir/object"), ("GET", "dir/object")]


def test_enforce_auth_accepts_the_created_key_and_rejects_a_wrong_secret():
    with S3Server(enforce_auth=True) as server:
        assert server.access_key.startswith("AKIA")
        server.make_bucket("auth-bucket")
        server.client().put_object(Bucket="auth-bucket", Key="k", Body=b"secret data")
        server.reset_counts()

        with pyarrow_fs(server).open_input_file("auth-bucket/k") as source:
            assert source.read() == b"secret data"
        with pytest.raises(OSError, match="ACCESS_DENIED"):
            pyarrow_fs(server, secret_key="not-the-secret").open_input_file("auth-bucket/k")
        with pytest.raises(botocore_exceptions.ClientError) as wrong_secret:
            proxied_client(server, secret_key="not-the-secret").get_object(
                Bucket="auth-bucket", Key="k")
        with pytest.raises(botocore_exceptions.ClientError) as unknown_key:
            proxied_client(server, access_key="AKIAUNKNOWNUNKNOWN00").get_object(
                Bucket="auth-bucket", Key="k")

        assert wrong_secret.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
        assert unknown_key.value.response["Error"]["Code"] == "InvalidAccessKeyId"
        assert [(r.method, r.status) for r in server.requests()] == [
            ("HEAD", 200), ("GET", 206), ("HEAD", 403), ("GET", 403), ("GET", 403)]
        process = server._process
    assert process.returncode is not None  # close() stopped moto


def test_default_server_accepts_any_credentials(s3_server, bucket):
    proxied_client(s3_server, access_key="anything", secret_key="whatever").put_object(
        Bucket=bucket, Key="k", Body=b"v")

    assert [r.status for r in s3_server.requests()] == [200]
