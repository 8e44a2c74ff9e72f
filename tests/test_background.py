"""The suite's background builds (background.py): each made once, in the order the tests need
them, its error raised in every test that asks for it."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

import background


@pytest.fixture
def builds(monkeypatch):
    """A register for this test's builds (removed after it: the session's own builds stay, and may
    be running meanwhile), and the order in which the builds ran."""
    ran = []

    def register(name, make):
        monkeypatch.setitem(background.BUILDS, name, background.Build(name, make))

    return SimpleNamespace(register=register, ran=ran)


def test_a_build_is_made_once_in_the_order_the_tests_need_it_and_waited_for(
    builds, tmp_path_factory
):
    release = threading.Event()

    def slow(factory):
        builds.ran.append("probe_slow")
        release.wait(5)
        return "slow's"

    def after(factory):  # starts from another build, as the DVC build starts from the built project
        builds.ran.append("probe_after")
        return background.get("probe_slow", factory) + " then after's"

    builds.register("probe_slow", slow)
    builds.register("probe_after", after)
    items = [
        SimpleNamespace(fixturenames=names)
        for names in (["tmp_path"], ["probe_after", "probe_slow"], ["probe_slow"])
    ]
    background.start(background.queue(items), tmp_path_factory)
    deadline = time.monotonic() + 5
    while builds.ran != ["probe_after", "probe_slow"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert builds.ran == ["probe_after", "probe_slow"]  # the thread runs "after", which waits
    waiting = threading.Thread(
        target=lambda: builds.ran.append(background.get("probe_after", tmp_path_factory))
    )
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive()  # a test that needs "probe_after" waits for it
    release.set()
    waiting.join(5)
    assert background.get("probe_slow", tmp_path_factory) == "slow's"
    assert builds.ran == ["probe_after", "probe_slow", "slow's then after's"]  # each made once


def test_a_failed_build_fails_every_test_that_needs_it(builds, tmp_path_factory):
    def broken(factory):
        builds.ran.append("probe_broken")
        raise RuntimeError("snakemake failed")

    builds.register("probe_broken", broken)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="snakemake failed"):
            background.get("probe_broken", tmp_path_factory)
    assert builds.ran == ["probe_broken"]


def test_the_tests_that_need_a_build_run_last_those_of_a_lane_s_later_builds_first(builds):
    """The session runs every test it can before it waits for a build (conftest's
    pytest_collection_modifyitems); then the tests of a lane's later builds, so that it makes
    those itself while the background makes the earlier ones."""
    for name in ("probe_first", "probe_then", "probe_alone"):
        builds.register(name, lambda factory: None)
    background.BUILDS["probe_alone"].lane = "probe lane"
    items = [
        SimpleNamespace(name=name, fixturenames=names)
        for name, names in (
            ("a", ["probe_first"]),
            ("b", ["tmp_path"]),
            ("c", ["tmp_path", "probe_then"]),
            ("d", ["probe_alone"]),
            ("e", ["probe_first", "probe_then"]),
            ("f", []),
            ("g", ["probe_first"]),
        )
    ]
    queue = background.queue(items)
    assert [build.name for build in queue] == ["probe_first", "probe_then", "probe_alone"]
    background.last(items, queue)
    assert [item.name for item in items] == ["b", "f", "c", "e", "a", "g", "d"]
