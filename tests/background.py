"""DAG builds that a test session runs beside its other tests.

A pipeline test spends its time waiting for Snakemake or DVC to build a DAG, which leaves a core
of the 2-core CI machine idle while the rest of the suite runs on the other one. A build
registered here (:func:`register`, by the name of the fixture that returns it) starts as soon as
collection shows that a selected test needs that fixture (conftest's ``pytest_collection_finish``
calls :func:`start`): in a background thread, one build after another in the order the tests
need them (a build that mostly waits, for SLURM, and the longest build, the paper DAG, each in a
thread of its own), its processes at a lower priority (nice 10: the tests that run meanwhile keep
their core). The tests that need a build run after all the others (:func:`last`), so that the
session waits for a build only when nothing else is left to run, and then takes a lane's later
builds from its other end. The fixture calls :func:`get`, which waits for the build, or makes it
in the calling thread when the background has not reached it yet. What a build makes and what
the tests assert do not change, only when the build runs."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

import pytest

#: the niceness of a background build's processes
NICE = 10
#: the wall seconds a build's command may take before it is killed: a guard against a hang, not a
#: budget (builds run at nice 10 beside the tests and beside each other, on 2 slow cores: the
#: paper DAG took 1213 s on a loaded machine)
LIMIT_S = 3600
#: what a build may raise: an error, or pytest's skip or failure (reported
#: by the tests that need it)
OUTCOMES = (Exception, pytest.skip.Exception, pytest.fail.Exception)


class Build:
    """One DAG, made once by whichever thread asks first; the others wait for it."""

    def __init__(self, name: str, make: Callable[..., object], lane: str = "cpu"):
        self.name, self.make, self.lane = name, make, lane
        self.lock = threading.Lock()
        self.done = False
        self.path: object = None
        self.error: Exception | None = None
        #: wall seconds the build took, in which thread; seconds the tests waited for it
        self.seconds, self.thread, self.waited = 0.0, "", 0.0

    def get(self, factory) -> object:
        asked = time.monotonic()
        with self.lock:
            if not self.done:
                try:
                    self.path = self.make(factory)
                except OUTCOMES as err:  # raised again in every test that needs the build
                    self.error = err
                self.done = True
                self.seconds = time.monotonic() - asked
                self.thread = threading.current_thread().name
        if threading.current_thread() is threading.main_thread():
            self.waited += time.monotonic() - asked
        if self.error is not None:
            raise self.error
        return self.path


BUILDS: dict[str, Build] = {}
#: set when the session ends: the background starts no further build
STOP = threading.Event()
#: what to undo when the session ends while a build is under way (a cluster's daemons)
UNDO: list[Callable[[], None]] = []


def register(name: str, make: Callable[..., object], lane: str = "cpu") -> None:
    """Make ``make(factory)`` the build of the fixture ``name``, which returns :func:`get` of it
    (``factory``: pytest's tmp_path_factory, for its folder and the builds it starts from).
    Builds of one ``lane`` run one after another; a build that mostly waits (for SLURM) takes a
    lane of its own, beside the builds that keep the CPU busy, and so does the longest build (the
    paper DAG), so that it runs from the start beside the shorter ones."""
    BUILDS[name] = Build(name, make, lane)


def get(name: str, factory):
    """What the build ``name`` made (``factory``: pytest's tmp_path_factory)."""
    return BUILDS[name].get(factory)


def builds_of(item) -> list[Build]:
    """The registered builds that the test ``item`` uses."""
    return [BUILDS[name] for name in getattr(item, "fixturenames", ()) if name in BUILDS]


def queue(items) -> list[Build]:
    """The builds that ``items`` use, in the order the tests first need them."""
    return list(dict.fromkeys(build for item in items for build in builds_of(item)))


def last(items: list, builds: list[Build]) -> None:
    """Reorder ``items`` in place: the tests that need no build first, in their order, so that the
    builds (``builds``: :func:`queue` of ``items``) have the whole session to run in the
    background; then those that need one, those needing a later build of a lane first: the
    session makes a build that its lane has not begun itself (:func:`get`), from the other end of
    the lane, while the background makes the earlier ones (of two tests at the same place in
    their lanes, the one needing a build later in ``builds`` last)."""
    place = {}
    for build in builds:
        place[build] = sum(other.lane == build.lane for other in place)

    def key(item) -> tuple[int, int]:
        needed = builds_of(item)
        return -max(place[b] for b in needed), max(builds.index(b) for b in needed)

    items[:] = [item for item in items if not builds_of(item)] + sorted(
        (item for item in items if builds_of(item)), key=key
    )


def start(queue: list[Build], factory) -> None:
    """Start, in the background, the builds ``queue`` (:func:`queue` of the collected tests), one
    thread per lane, each lane's builds in their order."""
    for lane in dict.fromkeys(build.lane for build in queue):
        builds = [build for build in queue if build.lane == lane]
        threading.Thread(
            target=_work, args=(builds, factory), name=f"{lane} builds", daemon=True
        ).start()


def summary() -> list[str]:
    """One line per build made: its wall seconds, where, and how long the tests waited for it."""
    return [
        f"{b.name}: {b.seconds:.0f} s in the {b.thread} thread, the tests waited {b.waited:.0f} s"
        + (" (failed)" if b.error is not None else "")
        for b in BUILDS.values()
        if b.done
    ]


def _work(queue: list[Build], factory) -> None:
    if sys.platform == "linux":  # the nice value of this thread only, which its processes inherit
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
    for build in queue:
        if STOP.is_set():
            return
        try:
            build.get(factory)
        except OUTCOMES:  # stored on the build: the tests that need it report it
            pass
