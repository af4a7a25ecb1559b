"""HTTP GETs the way a probe or a browser sees the service's listener."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def get(url: str) -> tuple[int, bytes, str]:
    """``(status, body, content type)`` of a GET, error statuses included."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read(), response.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers["Content-Type"]


def get_json(url: str) -> tuple[int, dict[str, Any]]:
    """``(status, decoded JSON body)`` of a GET, error statuses included."""
    status, body, _ = get(url)
    return status, json.loads(body)
