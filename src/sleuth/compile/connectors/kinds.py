"""The connectors (issue 27): a local or mounted folder (`folder`), a git repository (`git`), an
S3-compatible bucket (`s3`) and web pages (`web`), each kind in its own module.

Each is built here from its configuration (`build`), which is checked first: a folder the API names
must be below a folder the operator allowed (`SLEUTH_CONNECTOR_FOLDERS`), a URL must pass the address
guard (`addresses.check_url`). Their listings are sorted, so a sync is deterministic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sleuth.compile.connectors.addresses import AllowList, check_url
from sleuth.compile.connectors.base import Connector, ConnectorConfigError, ConnectorError
from sleuth.compile.connectors.configs import (
    FolderConfig,
    GitConfig,
    S3Config,
    WebConfig,
    parse_config,
)
from sleuth.compile.connectors.folder import FolderConnector
from sleuth.compile.connectors.git import GitConnector, check_ref
from sleuth.compile.connectors.s3 import S3Connector, s3_client
from sleuth.compile.sources import shown
from sleuth.settings import Settings


def build(
    kind: str,
    config: Mapping[str, Any],
    secret: Mapping[str, str],
    settings: Settings,
    workdir: Path,
    *,
    any_folder: bool = False,
    adding: bool = False,
    home: Path | None = None,
) -> Connector:
    """The connector `kind` with `config` (and its `secret`: credentials, never in `config`), checked
    against the operator's settings. `workdir` is where it may keep a cache (a git mirror);
    `any_folder`: the CLI, run by the machine's own user, which lifts the folder allow list and signs
    an S3 connector without keys with the user's own AWS credentials. `adding`: the
    connector is being added, so a folder must be there now (a sync of one that went away later
    fails that sync, as an unmounted share does). `home`: Sleuth's home, which a folder never reads."""
    allow = AllowList.parse(settings.connector_allow)
    parsed = parse_config(kind, config)
    include = tuple(parsed.include)
    if isinstance(parsed, FolderConfig):
        # Every message names the folder as the client gave it: the resolved path (links followed, `~`
        # expanded) would tell the client how this machine is laid out.
        given = parsed.path
        said = given if given.isprintable() and len(given) <= 400 else shown(given, 400)
        root = Path(given).expanduser()
        if not root.is_absolute():
            raise ConnectorConfigError("path: an absolute path")
        root = root.resolve()
        allowed = [Path(p.strip()).resolve() for p in settings.connector_folders.split(",") if p.strip()]
        if not any_folder and not any(root == a or a in root.parents for a in allowed):
            raise ConnectorError(
                f"{said} is not below a folder SLEUTH_CONNECTOR_FOLDERS allows (the operator lists the "
                "folders the server may read)"
            )
        # only after the allow list: what exists outside the allowed folders is not for a client to learn
        if adding and not root.is_dir():
            raise ConnectorConfigError(
                f"path: {said} is not a folder" if root.exists() else f"path: there is no folder {said}"
            )
        if home is not None and (root == home.resolve() or home.resolve() in root.parents):
            raise ConnectorError(f"{said} is inside Sleuth's home: its files are not a source")
        return FolderConnector(root, include, home, named=said)
    if isinstance(parsed, GitConfig):
        url = parsed.url
        address = check_url(url, allow, schemes=("https", "http", "file"))
        ref = check_ref(parsed.ref)
        # One mirror per URL: a mirror an older Sleuth made (full history) is replaced at its next sync.
        mirror = workdir / hashlib.sha256(url.encode()).hexdigest()[:16]
        return GitConnector(
            url,
            ref,
            mirror,
            include,
            address=None if address is None else str(address),
            max_bytes=settings.connector_max_bytes,
            max_file_bytes=settings.max_file_bytes,
        )
    if isinstance(parsed, S3Config):
        endpoint = parsed.endpoint_url
        if endpoint is not None:
            check_url(endpoint, allow)
        chain = settings.connector_s3_instance_credentials or any_folder  # the CLI: the user's own keys
        client = s3_client(parsed.model_dump(), secret, endpoint, chain)
        return S3Connector(parsed.bucket, parsed.prefix.lstrip("/"), client, include)
    assert isinstance(parsed, WebConfig)
    return _web(parsed, allow, settings)


def _web(config: WebConfig, allow: AllowList, settings: Settings) -> Connector:
    from sleuth.compile.connectors.web import WebConnector

    for url in [
        *config.urls,
        *([config.sitemap] if config.sitemap else []),
        *([config.prefix] if config.prefix else []),
    ]:
        check_url(url, allow)
    if config.max_pages > settings.connector_max_items:
        raise ConnectorConfigError(f"max_pages: 1 to {settings.connector_max_items}")
    return WebConnector(
        list(config.urls), allow, config.sitemap, config.prefix, config.max_pages, config.delay_s,
        settings.max_file_bytes,
    )  # fmt: skip
