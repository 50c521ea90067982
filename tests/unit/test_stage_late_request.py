"""The stage request waits for the listing, the agent does not: the session and the agent start
while the source is listed, blank keep-alive lines go until the request does, and a listing that
fails is the listing's error, not the host's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from provision.connection.local import LocalConnection
from provision.errors import ConfigError
from provision.remote import agent as agent_module
from provision.remote.agent import Agent
from provision.staging import make_request, stage
from provision.staging.sample import make_image_folder
from provision.staging.source import PlanFuture, plan_local


@pytest.fixture
def conn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalConnection:
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the 'host' caches its agent there
    return LocalConnection()


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_image_folder(tmp_path_factory.mktemp("late") / "pets", 300, classes=3, size=16)


def test_a_slow_listing_gets_keepalives_then_the_request(
    conn: LocalConnection, images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[bytes] = []
    real = agent_module._prepend

    def spy(first, request, rest):  # noqa: ANN001, ANN202
        for chunk in real(first, request, rest):
            sent.append(bytes(chunk[:2]))
            yield chunk

    monkeypatch.setattr(agent_module, "_prepend", spy)
    monkeypatch.setattr(agent_module, "KEEPALIVE_S", 0.1)
    began: list[float] = []
    real_call = Agent.call

    def call(self, command, request=None, **kw):  # noqa: ANN001, ANN202
        began.append(time.monotonic())
        return real_call(self, command, request, **kw)

    monkeypatch.setattr(Agent, "call", call)

    def slow() -> object:
        # 1.5 s counted from when the agent call began (bounded wait): on a loaded machine the
        # call may start late, and the keep-alives are what is asserted, not the start-up
        deadline = time.monotonic() + 30
        while not began and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.5)
        return plan_local(str(images))

    request = make_request(str(images), dest=str(tmp_path / "ssd"))
    listed = PlanFuture(slow)
    t0 = time.monotonic()
    result = stage.HostStage(conn, Agent(conn), request, listed).run_once()
    assert result["count"] == 300 and not result["skipped"]
    assert began[0] - t0 < 0.5  # the agent call did not wait for the listing
    keepalives = sent.count(b"\n")
    assert keepalives >= 5, sent[:20]  # ~1.5 s / 0.1 s
    assert sent.index(b"{\"") > sent.index(b"\n")  # the request line came after them


def test_a_listing_that_fails_is_the_listings_error(conn: LocalConnection, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    request = make_request(str(empty), dest=str(tmp_path / "ssd"))
    hs = stage.HostStage(conn, Agent(conn), request, PlanFuture(lambda: plan_local(str(empty))))
    with pytest.raises(ConfigError, match="no files to stage"):
        hs.run_once()
    assert not (tmp_path / "ssd" / "empty.lmdb").exists()
