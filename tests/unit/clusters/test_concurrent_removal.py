"""Two processes removing one cluster at once (a run's teardown and `kchaos cluster down`):
Docker answers the second 409 "removal … already in progress", which is not an error."""

from __future__ import annotations

from types import SimpleNamespace

import docker.errors
import pytest

from clusters.docker_labels import LabelledCluster


class _Container:
    def __init__(self, name: str, answer: int | None, reloads_left: int = 2) -> None:
        self.name = name
        self.answer = answer
        self.reloads_left = reloads_left
        self.removed = False

    def remove(self, force: bool) -> None:
        if self.answer is None:
            self.removed = True
            return
        raise docker.errors.APIError(
            f"{self.answer} Client Error",
            response=SimpleNamespace(status_code=self.answer, reason="", url=""),
            explanation=f"removal of container {self.name} is already in progress",
        )

    def reload(self) -> None:
        if self.reloads_left == 0:
            raise docker.errors.NotFound("gone")
        self.reloads_left -= 1


class _Network:
    def __init__(self) -> None:
        self.removed = False

    def remove(self) -> None:
        self.removed = True


def _cluster(containers: list[_Container], net: _Network) -> LabelledCluster:
    dc = LabelledCluster(client=None, cluster="c")  # type: ignore[arg-type]
    dc.containers = lambda all=True: containers  # type: ignore[method-assign]
    dc.networks = lambda: [net]  # type: ignore[method-assign]
    dc.client_containers = lambda: []  # type: ignore[method-assign]
    return dc


def test_a_container_another_process_is_removing_is_waited_for_then_the_network_goes():
    mine, theirs, net = _Container("n1", None), _Container("n2", 409), _Network()
    assert _cluster([mine, theirs], net).remove() == 2
    assert mine.removed and theirs.reloads_left == 0 and net.removed


def test_any_other_docker_refusal_still_raises():
    with pytest.raises(docker.errors.APIError):
        _cluster([_Container("n1", 500)], _Network()).remove()
