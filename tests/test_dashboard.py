"""The web dashboard: who sees what over real HTTP, and a real browser (Debian's
Chromium driven by Playwright) logging in, following a job, and redriving a dead letter."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.api_server import Client, serve, signup_and_login
from tests.helpers import ROOT, query, start_worker, stop, wait_for

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("PGSCHED_SCREENSHOTS", ROOT / "build" / "screenshots"))
PASSWORD = "correct horse"


def _job(client: Client, name: str, **extra: Any) -> int:
    response = client.post(
        "/api/v1/me/jobs",
        json={"name": name, "execute_at": datetime.now(UTC).isoformat(), **extra},
    )
    assert response.status_code == 201, response.text
    return int(response.json()["data"]["id"])


def _browser_session(base: str, username: str) -> httpx.Client:
    session = httpx.Client(base_url=base, timeout=10)
    login = session.post("/ui/login", data={"username": username, "password": PASSWORD})
    assert login.status_code == 303 and login.headers["location"] == "/ui", login.text
    return session


@pytest.fixture
def api(settings: Settings) -> Iterator[str]:
    with serve(settings) as base:
        yield base


def test_dashboard_needs_login_and_shows_only_your_jobs(api: str, settings: Settings) -> None:
    anon = httpx.Client(base_url=api, timeout=10)
    for path in ("/", "/ui", "/ui/jobs", "/ui/dead", "/ui/jobs/1"):
        response = anon.get(path, follow_redirects=True)
        assert response.url.path == "/ui/login", path
    wrong = anon.post("/ui/login", data={"username": "nobody", "password": "x"})
    assert wrong.status_code == 401 and "wrong username or password" in wrong.text
    forged = httpx.get(f"{api}/ui", cookies={"pgsched_session": "not-a-token"})
    assert forged.status_code == 303 and forged.headers["location"] == "/ui/login"

    ann, bob = signup_and_login(api, "ann", PASSWORD), signup_and_login(api, "bob", PASSWORD)
    signup_and_login(api, "boss", PASSWORD)
    promote = "UPDATE pgsched.users SET is_admin = true WHERE username = 'boss'"
    query(settings.database_url or "", promote)
    ann_job = _job(ann, "ann-<b>report</b>", execute_at="2030-01-01T00:00:00Z")
    bob_job = _job(bob, "bob-backup", execute_at="2030-01-01T00:00:00Z")

    as_ann = _browser_session(api, "ann")
    page = as_ann.get("/ui/jobs").text
    assert "ann-&lt;b&gt;report&lt;/b&gt;" in page  # escaped, never markup
    assert "bob-backup" not in page
    assert as_ann.get(f"/ui/jobs/{bob_job}").status_code == 404
    assert as_ann.get(f"/ui/jobs/{ann_job}").status_code == 200
    assert as_ann.get("/ui/jobs?state=paused").text.count("/ui/jobs/") == 0
    assert as_ann.get("/ui/jobs?name=REPORT").text.count(f'href="/ui/jobs/{ann_job}"') == 2
    assert as_ann.get("/ui/jobs?state=bogus").status_code == 400

    as_boss = _browser_session(api, "boss")
    page = as_boss.get("/ui/jobs").text
    assert "bob-backup" in page and "ann-&lt;b&gt;report" in page
    assert as_boss.get(f"/ui/jobs/{bob_job}").status_code == 200

    # a form posted from another site is refused, even with the cookie
    cross = as_ann.post("/ui/logout", headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403
    out = as_ann.post("/ui/logout")
    assert out.status_code == 303 and "pgsched_session=" in out.headers["set-cookie"]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
def test_dashboard_in_a_real_browser(api: str, settings: Settings, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    url = settings.database_url or ""
    worker = start_worker(settings, tmp_path / "worker.log")
    client = signup_and_login(api, "carol", PASSWORD)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)
            expect.set_options(timeout=20_000)  # live pages refresh every 5 s

            page.goto(f"{api}/ui")
            expect(page).to_have_url(re.compile(r"/ui/login$"))
            page.fill("input[name=username]", "carol")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            expect(page.locator("h1")).to_have_text("Overview")
            expect(page.locator("#workers-live")).to_have_text(re.compile(r"[1-9]"))
            page.screenshot(path=str(SCREENSHOTS / "1-overview.png"), full_page=True)

            # A job created through the API appears on the open page by itself.
            page.click("text=Jobs")
            expect(page.locator("h1")).to_have_text("Jobs")
            job_id = _job(client, "greeting", message="hello from the API")
            row = page.locator("#jobs tr", has_text="greeting")
            expect(row).to_be_visible()
            page.screenshot(path=str(SCREENSHOTS / "2-jobs.png"), full_page=True)

            row.locator(f"a[href='/ui/jobs/{job_id}']").first.click()
            expect(page.locator("h1")).to_contain_text(f"Job {job_id}")
            expect(page.locator("#runs")).to_contain_text("succeeded")
            page.screenshot(path=str(SCREENSHOTS / "3-job.png"), full_page=True)

            page.locator("#runs a").first.click()
            expect(page.locator("#run-state")).to_have_text("succeeded")
            expect(page.locator("#logs")).to_contain_text("hello from the API")
            page.screenshot(path=str(SCREENSHOTS / "4-run.png"), full_page=True)

            # A dead letter, redriven with the button.
            doomed = _job(client, "doomed", task="pgsched.fail", max_attempts=1)
            wait_for(
                "a dead letter",
                lambda: query(
                    url, "SELECT 1 FROM pgsched.runs WHERE dead AND job_id = %(j)s", {"j": doomed}
                ),
                timeout=30,
            )
            page.click("text=Dead letters")
            letter = page.locator("#dead tr", has_text="doomed")
            expect(letter).to_be_visible()
            page.screenshot(path=str(SCREENSHOTS / "5-dead.png"), full_page=True)
            letter.locator("button", has_text="Redrive").click()
            expect(page.locator("p.notice")).to_contain_text("Redriven: new run")
            page.screenshot(path=str(SCREENSHOTS / "6-redriven.png"), full_page=True)
            browser.close()
    finally:
        stop(worker)

    attempts = query(
        url,
        "SELECT attempt FROM pgsched.runs WHERE job_id = %(j)s ORDER BY attempt",
        {"j": doomed},
    )
    assert [a["attempt"] for a in attempts] == [1, 2]  # the redrive added one attempt
    assert sorted(p.name for p in SCREENSHOTS.glob("*.png")) >= [
        "1-overview.png",
        "2-jobs.png",
        "3-job.png",
        "4-run.png",
        "5-dead.png",
        "6-redriven.png",
    ]
