"""Where sql/ and migrations/ are: inside the wheel when installed, else the checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGED = Path(__file__).parent / "_data"
_CHECKOUT = Path(__file__).parent.parent


def resource_dir(name: str) -> Path:
    for base in (_PACKAGED, _CHECKOUT):
        candidate = base / name
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pgsched resource folder {name!r} is missing from the install")
