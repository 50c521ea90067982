"""How many agent calls a stage costs over real SSH: one (`stage`) on a host that has the agent,
no `ping` first; a host that lost its agent (the controller's memo says it has it) gets the same
call repeated with the agent, and the stream, which waits for the agent's `ready`, starts over
with it. The dataset is the same bytes each time (its checksum)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet import Fleet

from provision.remote.agent import Agent
from provision.staging import stage_dataset
from provision.staging.sample import make_image_folder

SSD = "/root/autodl-tmp"


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_image_folder(tmp_path_factory.mktemp("calls") / "imgs", 300, classes=3, size=48)


class _Counted(Agent):
    """An Agent that records each command it was asked to run (the real calls go through)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []
        self._inside = False  # Agent.call re-enters itself once (to name what the host is doing)

    def call(self, command, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
        if self._inside:
            return super().call(command, *args, **kwargs)
        self.commands.append(command)
        self._inside = True
        try:
            return super().call(command, *args, **kwargs)
        finally:
            self._inside = False


def test_a_stage_is_one_agent_call_and_survives_a_lost_agent(
    make_fleet, connect, images: Path
) -> None:
    fleet: Fleet = make_fleet(1)
    fh = fleet.hosts[0]

    first = _Counted(connect(fh.as_host()))
    done = stage_dataset(first.connection, first, str(images), name="a", dest=f"{SSD}/one")
    assert done["count"] == 300 and not done["skipped"]
    assert "ping" not in first.commands

    # the agent (and the py-lmdb shipped beside it) removed behind the controller's back
    fleet.ns_exec(fh, "rm -rf /root/.cache/provision")
    lost = _Counted(connect(fh.as_host()))
    again = stage_dataset(lost.connection, lost, str(images), name="b", dest=f"{SSD}/two")
    assert again["count"] == 300 and again["checksum"] == done["checksum"]
    assert lost.uploads >= 1  # the repeated call carried the agent
    assert "ping" not in lost.commands
    assert lost.commands[0] == "stage"

    # warm host, fresh connection, up-to-date dataset: exactly one call
    warm = _Counted(connect(fh.as_host()))
    skip = stage_dataset(warm.connection, warm, str(images), name="b", dest=f"{SSD}/two")
    assert skip["skipped"] is True and skip["checksum"] == done["checksum"]
    assert warm.commands == ["stage"]
