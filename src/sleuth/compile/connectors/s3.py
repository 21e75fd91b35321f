"""The S3 connector: objects below a prefix of an S3-compatible bucket, through boto3, signed only with
the connector's own keys (`s3_client`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sleuth.compile.connectors.base import ConnectorConfigError, ConnectorError, Item, included


@dataclass
class S3Connector:
    """Objects below a prefix of an S3-compatible bucket, through boto3; the etag is the version.

    An item's id is its key below the prefix as the bucket spells it: a key no path can hold
    (`prefix//name`, `../name`) keeps an id the sync refuses, so that item is skipped with its reason
    instead of failing the sync. Each item is fetched by the key it was listed under (`_keys`), never a
    key rebuilt from its id, which `//` would not survive. The client library's errors (a bucket that is
    not there, a refusal) are this connector's errors, with the bucket's own words."""

    bucket: str
    prefix: str
    client: Any
    include: tuple[str, ...] = ()
    kind: str = "s3"
    _keys: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def _below_prefix(self, key: str) -> str:
        rel = key[len(self.prefix) :]
        if self.prefix and not self.prefix.endswith("/") and rel.startswith("/"):
            rel = rel[1:]  # prefix `docs` names the folder `docs/`
        return rel

    def items(self) -> Iterator[Item]:
        self._keys.clear()
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        with _s3_errors(f"listing s3://{self.bucket}/{self.prefix}"):
            for page in pages:
                for obj in page.get("Contents", []):
                    key = str(obj["Key"])
                    rel = self._below_prefix(key)
                    if not rel or key.endswith("/") or not included(rel, self.include):
                        continue
                    self._keys[rel] = key
                    yield Item(
                        rel, str(obj["ETag"]).strip('"'), int(obj["Size"]), f"s3://{self.bucket}/{key}"
                    )

    def fetch(self, item: Item, max_bytes: int) -> bytes:
        if item.size is not None and item.size > max_bytes:
            raise ConnectorError(f"{item.id}: {item.size} bytes, over {max_bytes}")
        key = self._keys.get(item.id)
        if key is None:
            raise ConnectorError(f"{item.id}: not listed by this sync")
        with _s3_errors(f"reading s3://{self.bucket}/{key}"):
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            data: bytes = body.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ConnectorError(f"{item.id}: over {max_bytes} bytes")
        return data


@contextmanager
def _s3_errors(doing: str) -> Iterator[None]:
    """boto3's errors as `ConnectorError`: what the bucket said (`AccessDenied`, `NoSuchBucket`), or
    that it could not be reached."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        raise ConnectorError(f"{doing}: {code}: {error.get('Message') or 'refused'}") from None
    except BotoCoreError as exc:
        raise ConnectorError(f"{doing}: {exc}") from None


def s3_client(config: Mapping[str, Any], secret: Mapping[str, str], endpoint: Any, chain: bool) -> Any:
    """A boto3 client that signs with the connector's own keys, and with nothing else: without them its
    requests are unsigned (public buckets only), since boto3's own chain would sign with whatever this
    machine holds (the environment, ~/.aws, the instance role: with shared storage on S3, the keys of
    the bucket that holds every context). `chain`: the operator allowed that chain
    (`SLEUTH_CONNECTOR_S3_INSTANCE_CREDENTIALS`), or the CLI runs as the machine's own user. Only the
    endpoint the connector names is used, never one from the environment (`AWS_ENDPOINT_URL`)."""
    try:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
    except ImportError:
        raise ConnectorError("s3 connectors need boto3: pip install 'sleuth[s3]'") from None
    key_id, key = secret.get("access_key_id") or None, secret.get("secret_access_key") or None
    if (key_id is None) != (key is None):
        raise ConnectorConfigError("secret: both access_key_id and secret_access_key, or neither")
    options: dict[str, Any] = {"ignore_configured_endpoint_urls": True}
    if key_id is None and not chain:
        options["signature_version"] = UNSIGNED
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=str(config.get("region") or "us-east-1"),
        aws_access_key_id=key_id,
        aws_secret_access_key=key,
        aws_session_token=(secret.get("session_token") or None) if key_id else None,
        config=Config(**options),
    )
