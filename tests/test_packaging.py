"""A non-editable install carries sql/ and migrations/ inside the package."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT


@pytest.mark.skipif(
    bool(os.environ.get("PGSCHED_TEST_SERVER_URL")), reason="server-independent: run once"
)
def test_wheel_ships_sql_and_migrations_and_loads_them(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("pgsched-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "app/_data/sql/runs.sql" in names
    assert "app/_data/migrations/versions/0001_core.py" in names
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    # From elsewhere, with the installed copy first on the path and no checkout in sight.
    probe = (
        "import app.store.queries as q, app.resources as r;"
        "print(len(q.QUERIES), r.resource_dir('migrations'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    count, migrations = out.split()
    assert int(count) > 20 and migrations.startswith(str(target))
