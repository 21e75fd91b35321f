"""The s3 connector against moto's S3 server on loopback (issue 40, items 6 and 11).

- Without keys of its own a connector never signs with the server's AWS credentials (boto3's chain:
  the environment, ~/.aws, the instance role), unless the operator allows it: here moto checks every
  request against IAM, the environment holds the keys of an IAM user that may read every bucket, and a
  connector without a secret still cannot list a private bucket.
- A key no path can hold (`prefix//name`, `../name`) is skipped with its reason instead of failing the
  whole sync, and each object is read by the key it was listed under (`a//b.md` is not `a/b.md`).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import pytest

from sleuth.compile.connectors.base import Connector, ConnectorError, Limits
from sleuth.compile.connectors.kinds import build
from sleuth.compile.connectors.sync import sync
from sleuth.settings import Settings, current
from sleuth.store.contexts.home import Home
from tests import loopback
from tests.s3 import S3Server

EVERYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


def settings(**update: object) -> Settings:
    return current().model_copy(update={"connector_allow": "127.0.0.1", **update})


def s3(s3_server: S3Server, bucket: str, secret: dict[str, str], options: Settings, cache: Path) -> Connector:
    config = {"bucket": bucket, "prefix": "p/", "endpoint_url": s3_server.endpoint}
    return build("s3", config, secret, options, cache)


@contextmanager
def server_keys(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Keys of an IAM user that may do anything to any bucket, set as this process's own AWS
    credentials (as a server on S3 storage holds them), with moto checking every request against
    IAM; moto's checks are turned off again afterwards (its state is the process's)."""
    iam = boto3.client(
        "iam", endpoint_url=s3_server.endpoint, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )  # fmt: skip
    user = f"server-{secrets.token_hex(4)}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="everything", PolicyDocument=json.dumps(EVERYTHING))
    made = iam.create_access_key(UserName=user)["AccessKey"]
    keys = {"access_key_id": made["AccessKeyId"], "secret_access_key": made["SecretAccessKey"]}
    # boto3's default session keeps the credentials it first resolved: another test in this process may
    # have made it with other keys, which the instance-credential chain below would then sign with
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys["access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys["secret_access_key"])
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    quiet = logging.getLogger("werkzeug")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # moto answers an unsigned request under IAM checks with a traceback
    loopback.post(f"{s3_server.endpoint}/moto-api/reset-auth", content=b"0").raise_for_status()
    try:
        yield keys
    finally:
        loopback.post(f"{s3_server.endpoint}/moto-api/reset-auth", content=b"inf").raise_for_status()
        quiet.setLevel(level)


def test_a_connector_without_keys_never_signs_with_the_servers_credentials(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3_server.new_bucket()  # private: moto's default ACL
    s3_server.client().put_object(Bucket=bucket, Key="p/payroll.md", Body=b"# Payroll\n")
    with server_keys(s3_server, monkeypatch) as keys:
        keyless = s3(s3_server, bucket, {}, settings(), tmp_path)
        with pytest.raises(ConnectorError, match=f"listing s3://{bucket}/p/"):
            list(keyless.items())  # before the fix: signed with the environment's keys, and listed

        allowed = s3(s3_server, bucket, {}, settings(connector_s3_instance_credentials=True), tmp_path)
        assert [i.id for i in allowed.items()] == ["payroll.md"]  # the operator's leave: the chain
        own = s3(s3_server, bucket, keys, settings(), tmp_path)
        assert [i.id for i in own.items()] == ["payroll.md"]  # the connector's own keys always sign


def test_keys_no_path_can_hold_are_skipped_and_each_object_is_read_by_its_own_key(
    s3_server: S3Server, home: Home, tmp_path: Path
) -> None:
    bucket = s3_server.new_bucket()
    client = s3_server.client()
    objects = {
        "p/good.md": b"# Good\n",
        "p//rooted.md": b"# Rooted\n",  # below the prefix: `/rooted.md`, an absolute path
        "p/../up.md": b"# Up\n",
        "p/x//y.md": b"# Doubled\n",  # lands on x/y.md, read by its own key
        "p/x/y.md": b"# Plain\n",  # lands on x/y.md too: listed after, so skipped
    }
    for key, body in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    ctx = home.create("bucket-kb", "Bucket")
    secret = {"access_key_id": "testing", "secret_access_key": "testing"}
    connector = s3(s3_server, bucket, secret, settings(), tmp_path)

    report = sync(ctx, "bucket", connector, Limits.of(settings()))  # before the fix: NoSuchKey, sync failed

    assert sorted(report.added) == ["good.md", "x/y.md"]
    assert (ctx.sources / "bucket" / "x" / "y.md").read_bytes() == b"# Doubled\n"
    skipped = dict(report.skipped)
    assert set(skipped) == {"'/rooted.md'", "'../up.md'", "'x/y.md'"}, skipped
    assert "absolute" in skipped["'/rooted.md'"] and "'..'" in skipped["'../up.md'"]
    assert "another item" in skipped["'x/y.md'"]
    again = sync(ctx, "bucket", connector, Limits.of(settings()))
    assert (again.added, again.changed, again.deleted, again.unchanged) == ([], [], [], 2)
