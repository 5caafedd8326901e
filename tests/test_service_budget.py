"""The service's cost bounds: a suggest over its time budget or whose client went away is
abandoned with nothing changed, and heavy studies run in their own lane."""

import socket
import threading
import time

import numpy as np
import pytest

from dynbo import deadline
from dynbo.client import Client, ServiceError
from dynbo.deadline import Deadline
from dynbo.policies import GPUCB, register
from tests.test_service_http import CHEAP, in_process
from tests.test_service_manager import assert_states_equal

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

#: set to let every StuckGPUCB iteration finish
RELEASE = threading.Event()


@register
class StuckGPUCB(GPUCB):
    """GP-UCB whose iteration waits (checking its deadline, as the library's loops do)
    until ``RELEASE`` is set or 60 s passed."""

    name = "test-stuck-gp-ucb"

    def _clean(self, t, diag):
        stop = time.monotonic() + 60
        while not RELEASE.is_set() and time.monotonic() < stop:
            deadline.check("test loop")
            time.sleep(0.01)


def wait_for(predicate, seconds=60):
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_the_manager_abandons_an_interrupted_suggest_and_changes_nothing(tmp_path):
    from dynbo.service import ServiceStore, StudyManager

    managers = [StudyManager(ServiceStore(tmp_path / f"{k}.sqlite"), refit=False) for k in (0, 1)]
    try:
        for m in managers:
            m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
            for k in range(4):
                m.observe("a", float(np.sin(k)), x=[k / 4], t=float(k))
        interrupted, twin = managers
        before = interrupted.policy_state("a")
        events = len(interrupted.history("a"))
        cancel = threading.Event()
        cancel.set()
        with pytest.raises(Exception, match="cancelled in the .*nothing changed") as info:
            interrupted.suggest("a", 4.0, deadline=Deadline(cancel=cancel))
        assert info.value.status == 503
        assert_states_equal(before, interrupted.policy_state("a"))
        assert len(interrupted.history("a")) == events  # nothing logged
        study = interrupted.info("a")
        assert study["abandoned"] == 1 and "cancelled" in study["last_abandoned"]
        # the next suggest is the one an uninterrupted manager makes
        assert interrupted.suggest("a", 4.0)["x"] == twin.suggest("a", 4.0)["x"]
    finally:
        for m in managers:
            m.store.close()


def test_a_suggest_over_the_time_budget_is_503_and_logs_nothing(tmp_path):
    RELEASE.clear()
    with in_process(tmp_path / "s.sqlite", suggest_timeout=0.5, refit=False) as url:
        client = Client(url, retries=0)
        client.create_study("slow", "test-stuck-gp-ucb", [[0.0], [1.0]], options=CHEAP)
        with pytest.raises(ServiceError) as info:
            client.suggest("slow")
        assert info.value.status == 503
        assert "over the time budget of 0.5 s" in str(info.value)
        assert "--suggest-timeout" in str(info.value)
        assert client.history("slow") == []
        study = client.study("slow")
        assert study["suggestions"] == 0 and study["abandoned"] == 1
        # the alarm stream says so (a service alarm: no log event holds it)
        import urllib.request

        with urllib.request.urlopen(url + "/studies/slow/alarms?poll=0.1&seconds=1") as stream:
            text = stream.read().decode()
        assert "event: abandoned" in text and "over the time budget" in text


def test_a_client_that_goes_away_cancels_its_suggest(tmp_path):
    RELEASE.clear()
    with in_process(tmp_path / "s.sqlite", suggest_timeout=None, refit=False) as url:
        client = Client(url, retries=0)
        client.create_study("slow", "test-stuck-gp-ucb", [[0.0], [1.0]], options=CHEAP)
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                b"POST /studies/slow/suggest HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            )
            time.sleep(1.0)  # the work has started
        # without the cancellation the iteration would wait 60 s
        assert wait_for(lambda: client.study("slow")["abandoned"] == 1, seconds=30)
        assert "cancelled in the test loop" in client.study("slow")["last_abandoned"]
        assert client.history("slow") == []
        RELEASE.set()
        assert client.suggest("slow").query_id == 1  # the study goes on


def test_a_heavy_study_runs_in_its_own_lane(tmp_path, monkeypatch):
    """With one ordinary worker, a light study's suggest is answered while a heavy study's
    suggest holds the heavy lane (without lanes, it would wait for it)."""
    from dynbo.service import StudyManager

    RELEASE.clear()
    monkeypatch.setattr(StudyManager, "cost", lambda self, name: 5.0 if name == "heavy" else 0.0)
    with in_process(
        tmp_path / "s.sqlite", workers=1, heavy_workers=1, heavy_seconds=1.0, refit=False
    ) as url:
        client = Client(url, retries=0)
        client.create_study("heavy", "test-stuck-gp-ucb", [[0.0], [1.0]], options=CHEAP)
        client.create_study("light", "gp-ucb", [[0.0], [1.0]], options=CHEAP)
        answers = []
        worker = threading.Thread(target=lambda: answers.append(client.suggest("heavy")))
        worker.start()
        try:
            time.sleep(0.5)
            assert client.suggest("light").query_id == 1
            assert answers == []  # the heavy one is still working
        finally:
            RELEASE.set()
            worker.join(timeout=60)
        assert answers and answers[0].query_id == 1


def test_the_budget_settings_are_checked(tmp_path):
    from dynbo.service import create_app

    for kwargs, message in [
        ({"suggest_timeout": 0}, "suggest_timeout"),
        ({"heavy_workers": 0}, "heavy_workers"),
        ({"heavy_seconds": -1.0}, "heavy_seconds"),
    ]:
        with pytest.raises(ValueError, match=message):
            create_app(tmp_path / "s.sqlite", **kwargs)


# ---------------------------------------------------------------------- dataset cap


def test_a_study_with_a_dataset_cap_refuses_the_observation_over_it(tmp_path):
    from dynbo.service import ServiceStore, StudyManager

    manager = StudyManager(ServiceStore(tmp_path / "s.sqlite"), refit=False)
    try:
        for bad in (0, -1, 1.5, True, 10**9):
            with pytest.raises(Exception, match="max_dataset_size must be") as info:
                manager.create("a", "gp-ucb", [[0.0], [1.0]], max_dataset_size=bad)
            assert info.value.status == 422
        manager.create(
            "a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client", max_dataset_size=3
        )
        for k in range(3):
            manager.observe("a", float(k), x=[k / 3], t=float(k))
        before = manager.policy_state("a")
        with pytest.raises(Exception, match="max_dataset_size is 3") as info:
            manager.observe("a", 9.0, x=[0.9], t=3.0)
        assert info.value.status == 409
        assert_states_equal(before, manager.policy_state("a"))
        assert [e.kind for e in manager.history("a")] == ["observe"] * 3
        assert manager.info("a")["max_dataset_size"] == 3
    finally:
        manager.store.close()
    # the cap is stored with the study: a restarted service keeps it
    manager = StudyManager(ServiceStore(tmp_path / "s.sqlite"), refit=False)
    try:
        with pytest.raises(Exception, match="max_dataset_size is 3"):
            manager.observe("a", 9.0, x=[0.9], t=3.0)
    finally:
        manager.store.close()


def test_the_cap_over_http(tmp_path):
    with in_process(tmp_path / "s.sqlite", refit=False) as url:
        client = Client(url, retries=0)
        created = client.create_study(
            "a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client", max_dataset_size=1
        )
        assert created["max_dataset_size"] == 1
        client.observe("a", 0.5, x=[0.5], t=0.0)
        with pytest.raises(ServiceError) as info:
            client.observe("a", 0.5, x=[0.25], t=1.0)
        assert info.value.status == 409 and "max_dataset_size is 1" in str(info.value)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_service_store_is_migrated_with_nothing_lost(tmp_path, version):
    import sqlite3

    from dynbo import sqlite_files as storage_files
    from dynbo.service import ServiceStore, StudyManager, storage

    path = tmp_path / "old.sqlite"
    manager = StudyManager(ServiceStore(path), refit=False)
    manager.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    manager.observe("a", 0.5, x=[0.5], t=0.0)
    query = manager.suggest("a", 1.0)
    manager.store.close()
    # make it a store of that version: without the later columns (SQLite >= 3.35)
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE studies DROP COLUMN max_pending")
    db.execute("ALTER TABLE studies DROP COLUMN pending_expiry")
    db.execute("ALTER TABLE events DROP COLUMN constraints")
    if version <= 2:
        db.execute("ALTER TABLE events DROP COLUMN forgets")
        db.execute("ALTER TABLE events DROP COLUMN reason")
    if version == 1:
        db.execute("ALTER TABLE studies DROP COLUMN max_dataset_size")
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    db.commit()
    old = storage_files.schema_columns(storage._OLDER_SCHEMAS[version])
    assert storage_files._columns(db) == old
    db.close()
    manager = StudyManager(ServiceStore(path), refit=False)
    try:
        assert manager.info("a")["max_dataset_size"] is None
        assert manager.info("a")["max_pending"] == 1
        assert manager.info("a")["pending_expiry"] is None
        assert [e.kind for e in manager.history("a")] == ["observe", "suggest"]
        assert manager.suggest("a", 1.0)["query_id"] == query["query_id"]  # still pending
        assert manager.forget("a", 1, "a forget needs version 3")["forgets"] == 1
    finally:
        manager.store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("4",)
    assert storage_files._columns(db) == storage_files.schema_columns(storage._SCHEMA)
    db.close()


def test_a_budgeted_suggestion_after_a_background_refit_replays_exactly(tmp_path):
    """The live suggestion takes the fit made ahead (no fit checks); its replay fits:
    the cuts are replayed by kind of work, so the fit is not cut at the search's places."""
    from dynbo.service import ServiceStore, StudyManager

    path = tmp_path / "s.sqlite"
    manager = StudyManager(ServiceStore(path), refit=True, checkpoint_every=1000)
    try:
        manager.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
        for k in range(12):
            manager.observe("a", float(np.sin(3 * k)), x=[k / 12], t=float(k))
        manager.background("a")  # the refit a server runs after an observation
        query = manager.suggest("a", 12.0, budget=1e-6)
        spent = manager.info("a")["diagnostics"]["extra"]["time_budget"]["spent_at"]
        assert spent and all(s["where"] != "hyperparameter fit" for s in spent)
        state = manager.policy_state("a")
    finally:
        manager.store.close()
    manager = StudyManager(ServiceStore(path), refit=False)
    try:
        assert manager.info("a")["replay_mismatches"] == 0
        replayed = manager.policy_state("a")
        assert_states_equal(
            {k: v for k, v in state.items() if k != "diagnostics"},
            {k: v for k, v in replayed.items() if k != "diagnostics"},
        )
        assert manager.suggest("a", 12.0)["x"] == query["x"]
    finally:
        manager.store.close()


def test_a_replaced_query_is_no_longer_accounted_for_and_the_replay_agrees(tmp_path):
    from dynbo.service import ServiceStore, StudyManager

    path = tmp_path / "s.sqlite"
    manager = StudyManager(ServiceStore(path), refit=False, checkpoint_every=1000)
    try:
        manager.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
        for k in range(4):
            manager.observe("a", float(k % 2), x=[k / 4], t=float(k))
        for _ in range(3):
            last = manager.suggest("a", 4.0, replace=True)
        assert len(manager.policy_state("a")["pending"]) == 1  # only the newest
        manager.observe("a", 0.5, query_id=1)  # a replaced query stays answerable
        state = manager.policy_state("a")
        assert state["pending"] == [[last["x"], 4.0]]
    finally:
        manager.store.close()
    manager = StudyManager(ServiceStore(path), refit=False)
    try:
        assert manager.info("a")["replay_mismatches"] == 0
        assert_states_equal(
            {k: v for k, v in state.items() if k != "diagnostics"},
            {k: v for k, v in manager.policy_state("a").items() if k != "diagnostics"},
        )
    finally:
        manager.store.close()
