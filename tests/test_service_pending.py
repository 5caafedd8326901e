"""Several queries out per study: ``max_pending``, ``pending_expiry`` and suggest keys.

The manager-level tests check the rule on hand-checkable sequences and that a rebuild
from the log accounts for the same queries; the last test runs 4 clients against
``dynbo serve`` with ``max_pending = 4``, answers 200 queries in random order and kills
the server with SIGKILL in the middle (the servers come from the crash test's launcher).
"""

import signal
import threading
import time

import numpy as np
import pytest

from dynbo.client import Client
from dynbo.service import ServiceStore, StudyManager
from tests.test_service_crash import OPTIONS, Launcher, end, free_port
from tests.test_service_manager import assert_states_equal as assert_equal_states
from tests.test_service_manager import without_timings


def manager_at(path):
    return StudyManager(ServiceStore(path), refit=False)


def assert_states_equal(a, b):
    assert_equal_states(without_timings(a), without_timings(b))


def rebuilt_state(manager, name):
    """The policy state a rebuild from the log gives (as after a crash)."""
    manager._studies[name].policy = None
    return manager.policy_state(name)


def test_max_pending_queries_are_out_at_once_and_distinct(tmp_path):
    m = manager_at(tmp_path / "s.sqlite")
    try:
        m.create("a", "gp-ucb", [[0.0], [1.0]], options=OPTIONS, clock="client", max_pending=3)
        for k in range(4):
            m.observe("a", float(np.sin(3 * k)), x=[k / 4], t=0.0)
        queries = [m.suggest("a", 1.0) for _ in range(3)]
        assert [q["query_id"] for q in queries] == [1, 2, 3]
        assert not any(q["repeated"] for q in queries)
        assert len({q["x"][0] for q in queries}) == 3  # each accounts for the ones out
        # full: the oldest again, nothing asked or logged
        again = m.suggest("a", 1.5)
        assert again["repeated"] and again["query_id"] == 1
        assert [e.kind for e in m.history("a")].count("suggest") == 3
        info = m.info("a")
        assert [q["query_id"] for q in info["pending_queries"]] == [1, 2, 3]
        assert info["pending"]["query_id"] == 1
        assert len(m.policy_state("a")["pending"]) == 3
        # answers in any order; each frees a place
        m.observe("a", 0.3, query_id=2)
        assert [q["query_id"] for q in m.info("a")["pending_queries"]] == [1, 3]
        fourth = m.suggest("a", 2.0)
        assert fourth["query_id"] == 4 and not fourth["repeated"]
        # replace when full: the oldest stops counting as out but stays answerable
        fifth = m.suggest("a", 2.5, replace=True)
        assert fifth["query_id"] == 5
        assert [q["query_id"] for q in m.info("a")["pending_queries"]] == [3, 4, 5]
        state = m.policy_state("a")
        xs = {q["query_id"]: q["x"] for q in m.info("a")["pending_queries"]}
        assert [x for x, _ in state["pending"]] == [xs[3], xs[4], xs[5]]
        assert_states_equal(state, rebuilt_state(m, "a"))
        # the replaced one is still answerable, but no longer as a query out: its answer
        # may not be stamped before the latest time the study has seen
        with pytest.raises(Exception, match="time went backwards") as info:
            m.observe("a", 0.1, query_id=1)
        assert info.value.status == 422
        assert_states_equal(state, m.policy_state("a"))
        m.observe("a", 0.1, query_id=1, t=2.5)
        m.observe("a", 0.2, query_id=5)
        with pytest.raises(Exception, match="answered already") as info:
            m.observe("a", 0.2, query_id=5)
        assert info.value.status == 409
        live = m.policy_state("a")
        assert_states_equal(live, rebuilt_state(m, "a"))
        assert [q["query_id"] for q in m.info("a")["pending_queries"]] == [3, 4]
        # an uninterrupted server and a rebuilt one ask the same next query
        assert m.suggest("a", 3.0)["x"] == m.info("a")["pending_queries"][-1]["x"]
    finally:
        m.store.close()


def test_answers_in_any_order_equal_sequential_observes_of_the_same_points(tmp_path):
    """The policy's data after answers in a shuffled order is that of the same answers."""
    m = manager_at(tmp_path / "s.sqlite")
    try:
        m.create("a", "wdbo", [[0.0], [1.0]], options=OPTIONS, clock="client", max_pending=4)
        rng = np.random.default_rng(3)
        for step in range(5):
            t = float(step)
            queries = [m.suggest("a", t) for _ in range(4)]
            for i in rng.permutation(4):
                q = queries[i]
                m.observe("a", float(np.cos(5 * q["x"][0])), query_id=q["query_id"], t=t + 0.5)
            assert m.info("a")["pending_queries"] == []
        assert m.policy_state("a")["pending"] == []
        assert_states_equal(m.policy_state("a"), rebuilt_state(m, "a"))
    finally:
        m.store.close()


def test_a_query_out_longer_than_the_expiry_stops_counting_at_the_next_suggest(tmp_path):
    m = manager_at(tmp_path / "s.sqlite")
    try:
        m.create(
            "a",
            "gp-ucb",
            [[0.0], [1.0]],
            options=OPTIONS,
            clock="client",
            max_pending=2,
            pending_expiry=5.0,
        )
        m.observe("a", 0.5, x=[0.5], t=0.0)
        q1, q2 = m.suggest("a", 0.0), m.suggest("a", 1.0)
        assert m.suggest("a", 5.0)["query_id"] == q1["query_id"]  # 5 - 0 is not over 5
        q3 = m.suggest("a", 5.5)  # q1 has been out 5.5 s: it expires, q3 takes its place
        assert q3["query_id"] == 3 and not q3["repeated"]
        assert [q["query_id"] for q in m.info("a")["pending_queries"]] == [2, 3]
        assert sorted(x[0] for x, _ in m.policy_state("a")["pending"]) == sorted(
            [q2["x"][0], q3["x"][0]]
        )
        assert_states_equal(m.policy_state("a"), rebuilt_state(m, "a"))
        # an expired query's late answer is still an observation (nothing is lost)
        answer = m.observe("a", 0.7, query_id=q1["query_id"], t=5.5)
        assert answer["dataset_size"] == 2
        # both out expire at once later on
        q4 = m.suggest("a", 20.0)
        assert [q["query_id"] for q in m.info("a")["pending_queries"]] == [q4["query_id"]]
        assert_states_equal(m.policy_state("a"), rebuilt_state(m, "a"))
    finally:
        m.store.close()
    # the limits are stored with the study
    m = manager_at(tmp_path / "s.sqlite")
    try:
        info = m.info("a")
        assert (info["max_pending"], info["pending_expiry"]) == (2, 5.0)
    finally:
        m.store.close()


def test_a_repeated_suggest_key_returns_the_first_query(tmp_path):
    m = manager_at(tmp_path / "s.sqlite")
    try:
        m.create("a", "gp-ucb", [[0.0], [1.0]], options=OPTIONS, clock="client", max_pending=4)
        first = m.suggest("a", 0.0, key="k1")
        second = m.suggest("a", 0.5, key="k2")
        assert second["query_id"] == first["query_id"] + 1
        again = m.suggest("a", 1.0, key="k1")
        assert again == {**first, "repeated": True}
        m._studies["a"].policy = None  # after a crash too
        assert m.suggest("a", 1.0, key="k1") == {**first, "repeated": True}
        m.observe("a", 0.1, query_id=first["query_id"], t=1.0, key="k3")
        with pytest.raises(Exception, match="used by a observe") as info:
            m.suggest("a", 1.0, key="k3")
        assert info.value.status == 409
        with pytest.raises(Exception, match="used by a suggest") as info:
            m.observe("a", 0.1, query_id=second["query_id"], key="k2")
        assert info.value.status == 409
        assert [e.kind for e in m.history("a")] == ["suggest", "suggest", "observe"]
    finally:
        m.store.close()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_pending": 0}, "max_pending must be an integer from 1 to 64"),
        ({"max_pending": 65}, "max_pending must be an integer from 1 to 64"),
        ({"max_pending": True}, "max_pending must be"),
        ({"max_pending": 2.0}, "max_pending must be"),
        ({"pending_expiry": 0.0}, "pending_expiry must be positive"),
        ({"pending_expiry": -1}, "pending_expiry must be positive"),
        ({"pending_expiry": float("nan")}, "pending_expiry must be finite"),
        ({"pending_expiry": "1"}, "pending_expiry must be a number"),
    ],
)
def test_bad_limits_are_refused_and_no_study_is_made(tmp_path, fields, message):
    m = manager_at(tmp_path / "s.sqlite")
    try:
        with pytest.raises(Exception, match=message) as info:
            m.create("a", "gp-ucb", [[0.0], [1.0]], clock="client", **fields)
        assert info.value.status == 422
        assert m.studies() == []
    finally:
        m.store.close()


# ------------------------------------------------------------------ 4 devices, kill -9

CLIENTS = 4
ANSWERS = 200


def g(x, t):
    return float(-((x[0] - 0.5 - 0.3 * np.sin(t / 25.0)) ** 2))


def test_four_devices_answer_in_random_order_through_a_sigkill(tmp_path):
    store, port = tmp_path / "s.sqlite", free_port()
    args = ["serve", "--store", str(store), "--port", str(port), "--checkpoint-every", "7"]
    log = open(tmp_path / "servers.log", "wb")
    launcher = Launcher(args, log)
    server = [launcher.start()]
    url = f"http://127.0.0.1:{port}"
    answered: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    clock = {"t": 0.0}

    def device(index):
        """Ask, wait a random while (other devices answer meanwhile), answer; repeat."""
        rng = np.random.default_rng(100 + index)
        client = Client(url, retries=400, backoff=0.05, max_backoff=0.2)
        try:
            while True:
                with lock:  # the server refuses times that go backwards: one at a time
                    if len(answered) >= ANSWERS:
                        return
                    clock["t"] += 1.0
                    q = client.suggest("multi", t=clock["t"])
                    # each device holds at most one of the 4 out: never the oldest again
                    # (a retry whose first attempt was committed gets its query back)
                    assert q.query_id not in answered
                time.sleep(float(rng.uniform(0.0, 0.02)))
                with lock:
                    if len(answered) >= ANSWERS:
                        return  # its query stays out: the others have answered enough
                    clock["t"] += 0.5
                    when = clock["t"]
                    # the time order is checked by the server: answer under the lock
                    client.observe("multi", g(q.x, when), query_id=q.query_id, t=when)
                    answered.append(q.query_id)
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    try:
        Client(url, retries=400, backoff=0.05, max_backoff=0.2).create_study(
            "multi",
            "gp-ucb",
            [[0.0], [1.0]],
            options=OPTIONS,
            seed=5,
            clock="client",
            max_pending=CLIENTS,
        )
        threads = [threading.Thread(target=device, args=(i,)) for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        while True:  # kill -9 in the middle of the session
            with lock:
                if len(answered) >= ANSWERS // 2:
                    break
            time.sleep(0.01)
        end(server[-1], signal.SIGKILL)
        server.append(launcher.start())
        for thread in threads:
            thread.join(timeout=600)
        assert not errors, errors
        client = Client(url, retries=400, backoff=0.05, max_backoff=0.2)
        events = client.history("multi")
        observed = [e["query_id"] for e in events if e["kind"] == "observe"]
        suggested = [e["query_id"] for e in events if e["kind"] == "suggest"]
        assert len(observed) >= ANSWERS and sorted(observed) == sorted(set(observed))
        assert sorted(observed) == sorted(answered)  # none lost, none twice
        assert suggested == list(range(1, len(suggested) + 1))
        assert set(observed) <= set(suggested)
        assert observed != sorted(observed)  # the answers did come in another order
        info = client.study("multi")
        out = {q["query_id"] for q in info["pending_queries"]}
        assert out == set(suggested) - set(observed) and len(out) <= CLIENTS
        assert info["dataset_size"] == len(observed)
        data = client.dataset("multi")
        end(server[-1], signal.SIGTERM)
    finally:
        for pid in server:
            end(pid, signal.SIGKILL)
        launcher.close()
        log.close()
    # the kept data are exactly the answers, in the order the server accepted them
    xs = {e["query_id"]: e["x"][0] for e in events if e["kind"] == "suggest"}
    order = [e for e in events if e["kind"] == "observe"]
    np.testing.assert_array_equal(np.asarray(data["x"])[:, 0], [xs[e["query_id"]] for e in order])
    np.testing.assert_array_equal(np.asarray(data["y"]), [e["y"] for e in order])
