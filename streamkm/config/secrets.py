"""Which configuration keys hold secrets, and how their values are shown (masked) in errors,
logs and ``streamkm config show``."""

from __future__ import annotations

import re
from typing import Any

from pydantic import SecretStr

__all__ = ["SECRET_MASK", "is_secret_key", "mask_value"]

#: What a secret's value is shown as in errors, logs and ``streamkm config show``.
SECRET_MASK = "**********"
_SECRET_NAME = re.compile(r"(password|passwd|secret|token|credentials?|api_key|private_key|access_key)$",
                          re.IGNORECASE)


def is_secret_key(name: str) -> bool:
    """Whether a configuration key (its last dotted part) names a secret: a password, token,
    secret, credential, API, private or access key (``ssl_keyfile``, a path, is not one)."""
    return bool(_SECRET_NAME.search(name.rsplit(".", 1)[-1]))


def mask_value(key: str, value: Any) -> Any:
    """``value`` with every secret replaced by :data:`SECRET_MASK` (recursively in tables)."""
    if isinstance(value, SecretStr) or (is_secret_key(key) and value is not None
                                        and not isinstance(value, dict)):
        return SECRET_MASK
    if isinstance(value, dict):
        return {k: mask_value(f"{key}.{k}", v) for k, v in value.items()}
    return value
