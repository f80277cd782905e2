"""A real S3 API on loopback (moto's server) for tests of remote inputs and outputs.

Beam's S3 filesystem talks to it over HTTP exactly as to a cloud endpoint; the flags of
:attr:`S3Server.beam_args` point it there. Test data is put and read with boto3 directly, so
the code under test is not also the code that prepares and checks its files.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

BUCKET = "tasksieve-test"
_KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@dataclass(frozen=True)
class S3Server:
    """A running moto S3 server with one bucket."""

    endpoint: str
    bucket: str

    @property
    def beam_args(self) -> list[str]:
        return [
            f"--s3_endpoint_url={self.endpoint}",
            f"--s3_access_key_id={_KEYS['aws_access_key_id']}",
            f"--s3_secret_access_key={_KEYS['aws_secret_access_key']}",
            "--s3_region_name=us-east-1",
        ]

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1", **_KEYS)

    def put(self, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=self.bucket, Key=key, Body=data)

    def get(self, key: str) -> bytes:
        body: bytes = self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return body

    def keys(self, prefix: str) -> list[str]:
        pages = (
            self.client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=self.bucket, Prefix=prefix)
        )
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """Start moto's S3 server on a free loopback port with an empty bucket; stop it after."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        s3 = S3Server(f"http://{host}:{port}", BUCKET)
        s3.client().create_bucket(Bucket=BUCKET)
        yield s3
    finally:
        server.stop()
