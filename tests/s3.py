"""An S3-compatible server on loopback for the storage tests: moto's, the only one that installs here
(no Docker, no MinIO binary). It speaks the S3 REST API over real HTTP, so boto3 and `S3Storage` run
unchanged; it keeps objects in memory, so what it cannot show is durability or real latency."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from tests.ports import free_port


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def env(self) -> dict[str, str]:
        """What a Sleuth process needs to reach it (boto3's own variables)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )

    def new_bucket(self) -> str:
        name = f"sleuth-{secrets.token_hex(4)}"
        self.client().create_bucket(Bucket=name)
        return name


@contextmanager
def moto_s3() -> Iterator[S3Server]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield S3Server(f"http://{host}:{port}")
    finally:
        server.stop()
