"""The service's study manager in-process: rebuilds, validation, idempotency, additional queries."""

import sqlite3

import numpy as np
import pytest
import torch

from dynbo.policies import Policy
from dynbo.service import ServiceStore, StudyManager
from dynbo.service.studies import Conflict, Invalid, NotFound, Unavailable

pytestmark = pytest.mark.usefixtures("one_torch_thread")


CHEAP = {"raw_samples": 32, "restarts": 2, "acquisition_iterations": 20, "fit_iterations": 10}


def f(x, t):
    return float(-np.sum((np.asarray(x) - 0.5 - 0.2 * np.sin(t / 5.0)) ** 2))


def assert_states_equal(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_states_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (u, v) in enumerate(zip(a, b)):
            assert_states_equal(u, v, f"{path}[{i}]")
    else:
        assert a == b or (isinstance(a, float) and np.isnan(a) and np.isnan(b)), path


def without_timings(state):
    state = dict(state)
    diag = state["diagnostics"]
    if diag is not None:
        state["diagnostics"] = {k: v for k, v in diag.items() if not k.endswith("_seconds")}
    return state


def manager(path, **kw):
    return StudyManager(ServiceStore(path), **kw)


def test_a_rebuilt_study_is_the_uninterrupted_one(tmp_path):
    """Checkpoint + replay (suggestions included) = the policy that never stopped."""
    path = tmp_path / "s.sqlite"
    live = manager(path, checkpoint_every=4, refit=True)
    live.create("w", "wdbo", [[0.0, 0.0], [1.0, 1.0]], options=CHEAP, seed=3, clock="client")
    reference = Policy.from_state_dict(live.policy_state("w"))
    for k in range(10):
        q = live.suggest("w", t=float(k))
        r = reference.suggest(float(k))
        np.testing.assert_array_equal(q["x"], r.x)
        if k in (5, 9):  # "crash" with a query pending: rebuild from the file alone
            rebuilt = manager(path)
            assert_states_equal(
                without_timings(rebuilt.policy_state("w")),
                without_timings(live.policy_state("w")),
            )
            info = rebuilt.info("w")
            assert info["pending"]["query_id"] == q["query_id"]
            assert info["replay_mismatches"] == 0 and info["checkpoint_seq"] > 0
            rebuilt.store.close()
        y = f(q["x"], q["t"])
        live.observe("w", y, query_id=q["query_id"])
        reference.observe(r.x, r.t, y)
        assert live.background("w")["refit"]
    # the next suggestion of a rebuilt study is the uninterrupted one's
    rebuilt = manager(path)
    assert rebuilt.info("w")["observations"] == 10
    np.testing.assert_array_equal(rebuilt.suggest("w", t=10.0)["x"], reference.suggest(10.0).x)
    assert_states_equal(
        without_timings(rebuilt.policy_state("w")), without_timings(reference.state_dict())
    )


def test_bad_requests_raise_and_change_nothing(tmp_path):
    m = manager(tmp_path / "s.sqlite")
    m.create("a", "gp-ucb", [[0.0, 0.0], [1.0, 2.0]], options=CHEAP, clock="client")
    q = m.suggest("a", t=1.0)
    m.observe("a", 0.5, query_id=q["query_id"])
    q = m.suggest("a", t=2.0)
    state, events = m.policy_state("a"), len(m.history("a"))
    bad = [
        (NotFound, dict(query_id=99, y=1.0), "has no query 99"),
        (Conflict, dict(query_id=1, y=1.0), "answered already"),
        (Invalid, dict(query_id=2, y=float("nan")), "y must be finite"),
        (Invalid, dict(query_id=2, y=float("inf")), "y must be finite"),
        (Invalid, dict(x=[0.5, 3.0], t=3.0, y=1.0), "outside"),
        (Invalid, dict(x=[0.5], t=3.0, y=1.0), "list of 2 numbers"),
        (Invalid, dict(x=[0.5, 0.5], t=1.5, y=1.0), "time went backwards"),
        (Invalid, dict(x=[0.5, 0.5], y=1.0), "t is required"),
        (Invalid, dict(y=1.0), "x is required"),
        (Invalid, dict(query_id=2, x=[0.0, 0.0], y=1.0), "is not the point of query 2"),
        (Invalid, dict(query_id=2, y=1.0, key=""), "idempotency key"),
        (Invalid, dict(query_id=2, y=1.0, additional=[{"x": [0.1, 0.1]}]), "x and y"),
    ]
    for error, kwargs, message in bad:
        with pytest.raises(error, match=message):
            m.observe("a", **kwargs)
    for error, call, message in [
        (NotFound, lambda: m.suggest("b", t=3.0), "no study named 'b'"),
        (Invalid, lambda: m.suggest("a", t=float("nan"), replace=True), "t must be finite"),
        (Invalid, lambda: m.suggest("a", t=0.5, replace=True), "time went backwards"),
        (Invalid, lambda: m.suggest("a", replace=True), "t is required"),
        (Invalid, lambda: m.suggest("a/../b", t=3.0), "invalid study name"),
        (Invalid, lambda: m.create("c\n", "gp-ucb", [[0.0], [1.0]]), "invalid study name"),
        # the pending query is returned again only to a valid t
        (Invalid, lambda: m.suggest("a", t=float("nan")), "t must be finite"),
        (Invalid, lambda: m.suggest("a", t=0.5), "time went backwards"),
        (Invalid, lambda: m.suggest("a"), "t is required"),
        (Conflict, lambda: m.create("a", "gp-ucb", [[0.0], [1.0]]), "exists already"),
        (Invalid, lambda: m.create("c", "nope", [[0.0], [1.0]]), "unknown policy"),
        (Invalid, lambda: m.create("c", "gp-ucb", [[1.0], [0.0]]), "below its upper"),
        (Invalid, lambda: m.create("c", "gp-ucb", [[0.0], [1.0, 2.0]]), "bounds must be"),
        (Invalid, lambda: m.create("c", "gp-ucb", [[0.0], [1.0]], options={"x": 1}), "unknown"),
        (Invalid, lambda: m.create("c", "gp-ucb", [[0.0], [1.0]], options={"seed": 1}), "field"),
        (
            Invalid,
            lambda: m.create("c", "gp-ucb", [[0.0], [1.0]], options={"raw_samples": 10**9}),
            "limit",
        ),
        (
            Invalid,
            lambda: m.create("c", "gp-ucb", [[0.0], [1.0]], options={"restarts": -1}),
            "restarts",
        ),
        (Invalid, lambda: m.create("c", "gp-ucb", [[0.0], [1.0]], clock="moon"), "clock"),
        (Invalid, lambda: m.create("c", "gp-ucb", [[0.0], [1.0]], seed=-1), "seed"),
    ]:
        with pytest.raises(error, match=message):
            call()
    assert_states_equal(state, m.policy_state("a"))
    assert len(m.history("a")) == events
    assert [s["name"] for s in m.studies()] == ["a"]
    # and the pending query can still be answered
    assert m.observe("a", 1.0, query_id=2)["observation"] == 2


def test_an_idempotency_key_records_once_and_returns_the_first_response(tmp_path):
    m = manager(tmp_path / "s.sqlite")
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    q = m.suggest("a", t=0.0)
    first = m.observe("a", 0.25, query_id=q["query_id"], key="k1")
    again = m.observe("a", 0.25, query_id=q["query_id"], key="k1")
    assert again == {**first, "repeated": True}
    # after a restart too
    m2 = manager(tmp_path / "s.sqlite")
    assert m2.observe("a", 0.25, query_id=q["query_id"], key="k1") == again
    assert [e.kind for e in m2.history("a")] == ["suggest", "observe"]
    assert m2.info("a")["observations"] == 1


def test_a_pending_query_is_returned_again_unless_replaced(tmp_path):
    m = manager(tmp_path / "s.sqlite")
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    q1 = m.suggest("a", t=0.0)
    assert not q1["repeated"]
    again = m.suggest("a", t=5.0)
    assert again == {**q1, "repeated": True}
    q2 = m.suggest("a", t=1.0, replace=True)
    assert q2["query_id"] == 2 and q2["t"] == 1.0
    # a free observation leaves the pending query pending
    m.observe("a", 0.1, x=[0.3], t=1.5)
    assert m.suggest("a", t=2.0)["query_id"] == 2
    m.observe("a", 0.2, query_id=2, t=2.0)
    assert m.suggest("a", t=3.0)["query_id"] == 3
    info = m.info("a")
    assert (info["suggestions"], info["observations"], info["dataset_size"]) == (3, 2, 2)


def test_the_wall_clock_counts_seconds_since_the_study_was_created(tmp_path):
    now = [1000.0]
    m = manager(tmp_path / "s.sqlite", clock=lambda: now[0])
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP)
    now[0] = 1002.5
    q = m.suggest("a")
    assert q["t"] == 2.5
    for replace in (True, False):  # a t is refused, a query pending or not
        with pytest.raises(Invalid, match="wall clock"):
            m.suggest("a", t=3.0, replace=replace)
    now[0] = 1004.0
    record = m.observe("a", 1.0, x=[0.2])  # a free observation: t is the server's now
    assert record["t"] == 4.0
    assert m.observe("a", 1.0, query_id=q["query_id"], t=4.5)["t"] == 4.5
    now[0] = 1003.0  # the clock stepped back: time never does
    assert m.suggest("a")["t"] == 4.5


def test_a_failed_commit_changes_nothing(tmp_path, monkeypatch):
    m = manager(tmp_path / "s.sqlite")
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    q = m.suggest("a", t=0.0)
    state = m.policy_state("a")

    def full_disk(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(m.store, "append", full_disk)
    with pytest.raises(Unavailable, match="disk is full"):
        m.observe("a", 0.5, query_id=q["query_id"])
    monkeypatch.undo()
    assert_states_equal(without_timings(state), without_timings(m.policy_state("a")))
    assert m.info("a")["pending"]["query_id"] == q["query_id"]
    assert m.observe("a", 0.5, query_id=q["query_id"])["observation"] == 1


def test_a_store_that_fails_on_create_or_delete_is_unavailable_and_changes_nothing(
    tmp_path, monkeypatch
):
    m = manager(tmp_path / "s.sqlite")
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")

    def locked(*args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(m.store, "create_study", locked)
    monkeypatch.setattr(m.store, "delete_study", locked)
    with pytest.raises(Unavailable, match="locked"):  # 503: the client retries
        m.create("b", "gp-ucb", [[0.0], [1.0]], options=CHEAP)
    with pytest.raises(Unavailable, match="locked"):
        m.delete("a")
    monkeypatch.undo()
    assert [s["name"] for s in m.studies()] == ["a"]
    assert m.suggest("a", t=0.0)["query_id"] == 1
    m.create("b", "gp-ucb", [[0.0], [1.0]], options=CHEAP)


def test_an_unreadable_checkpoint_is_passed_over_and_the_log_rebuilds_the_study(tmp_path):
    path = tmp_path / "s.sqlite"
    live = manager(path)
    live.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, seed=1, clock="client")
    for k in range(5):
        q = live.suggest("a", t=float(k))
        live.observe("a", f(q["x"], k), query_id=q["query_id"])
        if k == 3:
            live.checkpoint("a")
    assert live.store.checkpoint_seq("a") > 0
    expected = Policy.from_state_dict(live.policy_state("a")).suggest(5.0).x
    live.store.close()
    with sqlite3.connect(path) as db:  # bytes changed outside the service
        db.execute("UPDATE checkpoints SET state = X'00010203' WHERE study = 'a'")
    rebuilt = manager(path)
    assert rebuilt.info("a")["observations"] == 5
    np.testing.assert_array_equal(rebuilt.suggest("a", t=5.0)["x"], expected)


def test_a_damaged_event_is_named_and_leaves_the_other_studies_usable(tmp_path):
    from dynbo.service.dashboard import dashboard_data, render_dashboard
    from dynbo.service.storage import DamagedLog

    path = tmp_path / "s.sqlite"
    m = manager(path)
    for name in ("good", "bad"):
        m.create(name, "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
        q = m.suggest(name, t=0.0)
        m.observe(name, 0.5, query_id=q["query_id"])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET x = 'garbage' WHERE study = 'bad' AND seq = 2")
    m = manager(path)
    with pytest.raises(DamagedLog, match="event 2 of study 'bad'"):
        m.info("bad")
    with pytest.raises(DamagedLog, match="event 2 of study 'bad'"):
        m.history("bad")
    assert m.suggest("good", t=1.0)["query_id"] == 2
    page = render_dashboard(dashboard_data(m))
    assert "event 2 of study 'bad'" in page and '"name": "good"' in page


def test_delete_removes_the_study_and_its_log(tmp_path):
    m = manager(tmp_path / "s.sqlite")
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    m.suggest("a", t=0.0)
    m.checkpoint("a")
    m.delete("a")
    with pytest.raises(NotFound):
        m.info("a")
    with pytest.raises(NotFound):
        m.delete("a")
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    assert m.info("a")["events"] == 0 and m.history("a") == []
    assert manager(tmp_path / "s.sqlite").info("a")["checkpoint_seq"] == 0


def test_additional_queries_are_forwarded_stored_and_replayed(tmp_path):
    """SparQ-GP-UCB asks for fresh values at past inputs: answered with the observation."""
    m = manager(tmp_path / "s.sqlite", checkpoint_every=3)
    m.create("a", "sparq-gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    m.create("plain", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    assert m.suggest("plain", t=0.0)["additional"] == []
    for k in range(5):
        q = m.suggest("a", t=float(k))
        assert len(q["additional"]) >= 1
        answers = [{"x": x, "y": f(x, k + 0.5), "t": k + 0.5} for x in q["additional"]]
        if k == 2:  # a refused answer (not a requested point) changes nothing
            before = m.policy_state("a")
            with pytest.raises(Invalid):
                m.observe("a", 0.1, query_id=q["query_id"], additional=[{"x": [0.123], "y": 0.3}])
            with pytest.raises(Invalid, match="outside"):
                m.observe("a", 0.1, query_id=q["query_id"], additional=[{"x": [7.0], "y": 0.3}])
            assert_states_equal(before, m.policy_state("a"))
        record = m.observe("a", f(q["x"], k), query_id=q["query_id"], additional=answers)
        assert record["additional"] == len(answers)
        m.background("a")
    assert m.history("a")[-1].additional == answers
    rebuilt = manager(tmp_path / "s.sqlite")
    assert rebuilt.info("a")["replay_mismatches"] == 0
    assert_states_equal(
        without_timings(rebuilt.policy_state("a")), without_timings(m.policy_state("a"))
    )


def test_options_nested_too_deeply_or_too_costly_are_refused(tmp_path):
    """Checked without recursion, before any policy is built: 422s, not 500s or hangs."""
    m = manager(tmp_path / "s.sqlite")
    deep = 1.0
    for _ in range(100_000):  # far deeper than Python's recursion limit
        deep = [deep]
    nested = {"kind": "constant"}
    for _ in range(600):
        nested = {"a": nested}
    for options, message in [
        ({"candidates": deep}, "option candidates nests"),
        ({"beta": nested}, "option beta nests"),
        ({"initial_hyperparameters": {"noise": [[[[[[[[[0.1]]]]]]]]]}}, "nests"),
        ({"dpp_max_steps": 10**12}, "dpp_max_steps = 1000000000000 is above"),
        ({"device": "meta"}, "device = 'meta'"),
        ({"device": ["cpu"]}, "device"),
    ]:
        with pytest.raises(Invalid, match=message):
            m.create("c", "sparq-gp-ucb", [[0.0], [1.0]], options=options)
    assert m.studies() == []
    # what a policy takes is still accepted
    m.create("c", "gp-ucb", [[0.0], [1.0]], options={**CHEAP, "candidates": [[0.25], [0.5]]})
    m.create("d", "sparq-gp-ucb", [[0.0], [1.0]], options={"dpp_max_steps": 100_000})
    m.create("e", "gp-ucb", [[0.0], [1.0]], options={"device": "cpu"})


def test_any_failure_between_the_policy_and_the_log_rebuilds_the_policy(tmp_path, monkeypatch):
    """Not only a full disk: whatever fails after the policy call, it never runs ahead of
    the log (its random stream would then differ from a restarted server's)."""
    import dynbo.service.studies as studies

    m = manager(tmp_path / "s.sqlite")
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, seed=7, clock="client")
    reference = Policy.from_state_dict(m.policy_state("a"))

    def broken(*args, **kwargs):
        raise RuntimeError("an encoding bug")

    # a failure while the query is turned into its record: before the commit
    monkeypatch.setattr(studies, "plain", broken)
    with pytest.raises(RuntimeError, match="encoding bug"):
        m.suggest("a", t=0.0)
    monkeypatch.undo()
    # a failure of the commit that is not an sqlite3.Error
    monkeypatch.setattr(m.store, "append", broken)
    with pytest.raises(RuntimeError, match="encoding bug"):
        m.suggest("a", t=0.0)
    monkeypatch.undo()
    assert m.history("a") == []
    q = m.suggest("a", t=0.0)
    r = reference.suggest(0.0)
    np.testing.assert_array_equal(q["x"], r.x)  # the uninterrupted random stream
    monkeypatch.setattr(m.store, "append", broken)
    with pytest.raises(RuntimeError, match="encoding bug"):
        m.observe("a", 0.5, query_id=q["query_id"])
    monkeypatch.undo()
    assert m.info("a")["observations"] == 0 and m.info("a")["dataset_size"] == 0
    m.observe("a", 0.5, query_id=q["query_id"])
    reference.observe(r.x, r.t, 0.5)
    np.testing.assert_array_equal(m.suggest("a", t=1.0)["x"], reference.suggest(1.0).x)


class _CommitFailsOnce:
    """An sqlite3 connection whose next ``COMMIT`` fails with the transaction left open."""

    def __init__(self, db):
        self.db = db
        self.armed = True

    def execute(self, sql, *args):
        if sql == "COMMIT" and self.armed:
            self.armed = False
            raise sqlite3.OperationalError("disk I/O error")
        return self.db.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.db, name)


def test_a_failed_commit_statement_rolls_back_and_the_store_stays_usable(tmp_path):
    m = manager(tmp_path / "s.sqlite")
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    q = m.suggest("a", t=0.0)
    m.store._db = _CommitFailsOnce(m.store._db)
    with pytest.raises(Unavailable, match="disk I/O error"):
        m.observe("a", 0.5, query_id=q["query_id"], key="k")
    assert not m.store._db.in_transaction
    # the failed write is not visible (not even to this connection), and the next one works
    assert [e.kind for e in m.history("a")] == ["suggest"]
    assert m.info("a")["observations"] == 0
    assert not m.observe("a", 0.5, query_id=q["query_id"], key="k")["repeated"]
    on_disk = manager(tmp_path / "s.sqlite")
    assert [e.kind for e in on_disk.history("a")] == ["suggest", "observe"]
    assert on_disk.info("a")["observations"] == 1


def test_idempotency_keys_are_scoped_per_study(tmp_path):
    m = manager(tmp_path / "s.sqlite")
    for name in ("a", "b"):
        m.create(name, "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    first = m.observe("a", 0.1, x=[0.2], t=0.0, key="same")
    other = m.observe("b", 0.9, x=[0.7], t=0.0, key="same")  # another study: recorded
    assert not first["repeated"] and not other["repeated"] and other["y"] == 0.9
    assert m.observe("a", 0.5, x=[0.4], t=1.0, key="same") == {**first, "repeated": True}
    assert (m.info("a")["observations"], m.info("b")["observations"]) == (1, 1)
    # a deleted study's keys go with it
    m.delete("a")
    m.create("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    assert not m.observe("a", 0.3, x=[0.3], t=0.0, key="same")["repeated"]
