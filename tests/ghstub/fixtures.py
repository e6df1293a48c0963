"""Pytest fixtures for the GitHub stand-in. Import the ones you need into a test module:

    from tests.ghstub.fixtures import ghstub, github_client  # noqa: F401
"""

from __future__ import annotations

import threading

import pytest

from tests.ghstub import GitHubStub

REPO = "acme/models"
BOT_LOGIN = "minify-bot"
BOT_TOKEN = "bot-token"


def seeded_stub(prefix: str = "") -> GitHubStub:
    stub = GitHubStub(prefix=prefix)
    stub.add_repo(REPO)
    stub.add_user(BOT_LOGIN, token=BOT_TOKEN, permission="write", type="Bot")
    stub.add_user("alice", token="alice-token", permission="admin")
    stub.add_user("mallory", token="mallory-token", permission="read")
    return stub.start()


@pytest.fixture
def ghstub():
    stub = seeded_stub()
    try:
        yield stub
    finally:
        stub.stop()


@pytest.fixture
def ghstub_ghes():
    stub = seeded_stub("/api/v3")
    try:
        yield stub
    finally:
        stub.stop()


def make_client(stub: GitHubStub, token: str = BOT_TOKEN, **kwargs):
    """A real PyGithub client pointed at the stub, without client-side pacing."""
    import github

    kwargs.setdefault("seconds_between_requests", 0)
    kwargs.setdefault("seconds_between_writes", 0)
    kwargs.setdefault("timeout", 10)
    return github.Github(auth=github.Auth.Token(token), base_url=stub.base_url, **kwargs)


@pytest.fixture
def github_client(ghstub):
    gh = make_client(ghstub)
    try:
        yield gh
    finally:
        gh.close()


def at_once(fn, items, timeout: float = 60) -> list[BaseException]:
    """Call ``fn(item)`` for every item in its own thread, all released together (a race between
    reporters); returns the exceptions raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(items))

    def go(item):
        try:
            barrier.wait()
            fn(item)
        except Exception as exc:  # noqa: BLE001 - collected for the test to assert on
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(item,)) for item in items]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout)
    return errors
