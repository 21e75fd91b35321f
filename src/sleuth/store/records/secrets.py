"""Secrets at rest (issue 27): a connector's credentials are stored encrypted, never returned.

Fernet (the `cryptography` package: AES-128-CBC with an HMAC-SHA256, a timestamped token) is the
field's well-kept choice for "encrypt a small value with a key kept elsewhere". The key is
`SLEUTH_SECRET_KEY` when set (every machine of a many-machine deployment must share it), else
`$SLEUTH_HOME/secret.key`, created on first use with mode 0600. A copy of the contexts without the key
(a pack, a backup of `contexts/`) holds no usable credential.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from sleuth.errors import Failed

KEY_ENV = "SLEUTH_SECRET_KEY"


class SecretUnreadable(Failed):
    """A stored secret cannot be decrypted: the key changed or the value was altered."""


class SecretBox:
    def __init__(self, home: Path) -> None:
        self._key_file = home / "secret.key"

    def _fernet(self) -> Fernet:
        key = os.environ.get(KEY_ENV)
        if key:
            return Fernet(key.encode())
        try:
            return Fernet(self._key_file.read_bytes().strip())
        except FileNotFoundError:
            pass
        self._key_file.parent.mkdir(parents=True, exist_ok=True)
        fresh = Fernet.generate_key()
        try:
            fd = os.open(self._key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            return Fernet(self._key_file.read_bytes().strip())
        with os.fdopen(fd, "wb") as fh:
            fh.write(fresh)
        return Fernet(fresh)

    def seal(self, values: dict[str, str]) -> str:
        return self._fernet().encrypt(json.dumps(values).encode()).decode()

    def open(self, token: str) -> dict[str, str]:
        if not token:
            return {}
        try:
            data: dict[str, str] = json.loads(self._fernet().decrypt(token.encode()))
        except InvalidToken:
            raise SecretUnreadable(
                f"a stored secret cannot be decrypted: {KEY_ENV} or {self._key_file} changed; "
                "set the secret again"
            ) from None
        return data
