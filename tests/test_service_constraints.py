"""Constraints through the service: ``observe`` takes the measured constraint values, the
log keeps them (a replay gives them to the policy again), the study counts violations,
and the dashboard data mark them."""

import numpy as np
import pytest

from dynbo.service import ServiceStore, StudyManager
from dynbo.service.dashboard import dashboard_data
from tests.test_service_crash import OPTIONS
from tests.test_service_manager import assert_states_equal, without_timings


def manager_at(path):
    return StudyManager(ServiceStore(path), refit=False)


def constrained(m, mode="feasibility"):
    options = {**OPTIONS, "constraints": ["temperature"], "constraint_mode": mode}
    if mode == "safe":
        options["safe_points"] = [[0.5]]
    return m.create("a", "gp-ucb", [[0.0], [1.0]], options=options, clock="client")


def c(x):
    """Safe (>= 0) on [0, 0.7]."""
    return 0.7 - x


@pytest.mark.parametrize("mode", ["feasibility", "safe"])
def test_constraint_values_are_logged_replayed_and_counted(tmp_path, mode):
    m = manager_at(tmp_path / "s.sqlite")
    try:
        constrained(m, mode)
        violated = 0
        for k, x in enumerate([0.1, 0.5, 0.9, 0.3]):
            answer = m.observe(
                "a", float(np.sin(3 * x)), x=[x], t=float(k), constraints={"temperature": c(x)}
            )
            assert answer["violated"] == (c(x) < 0)
            violated += c(x) < 0
        for k in range(4, 8):
            q = m.suggest("a", float(k))
            x = q["x"][0]
            m.observe(
                "a", float(np.sin(3 * x)), query_id=q["query_id"], constraints={"temperature": c(x)}
            )
            violated += c(x) < 0
        info = m.info("a")
        assert info["violations"] == violated >= 1
        live = without_timings(m.policy_state("a"))
        m._studies["a"].policy = None  # a rebuild from the log gives the constraints again
        assert_states_equal(live, without_timings(m.policy_state("a")))
        assert m.info("a")["violations"] == violated
        events = [e for e in m.history("a") if e.kind == "observe"]
        assert all(set(e.constraints) == {"temperature"} for e in events)
        assert [s["violations"] for s in m.studies()] == [violated]
        (shown,) = dashboard_data(m)
        assert shown["violations"] == violated and len(shown["violated"]) == violated
    finally:
        m.store.close()
    # and after a restart
    m = manager_at(tmp_path / "s.sqlite")
    try:
        assert m.info("a")["violations"] == violated
    finally:
        m.store.close()


def test_bad_constraint_values_are_refused_and_change_nothing(tmp_path):
    m = manager_at(tmp_path / "s.sqlite")
    try:
        constrained(m)
        m.observe("a", 0.2, x=[0.2], t=0.0, constraints={"temperature": 0.5})
        before = without_timings(m.policy_state("a"))
        for bad, message in [
            (None, "temperature"),  # declared, so required
            ({}, "temperature"),
            ({"temperature": 0.1, "pressure": 1.0}, "pressure"),
            ({"temperature": float("nan")}, "finite"),
            ({"temperature": "hot"}, "must be a number"),
            ([0.5], "constraints must be an object"),
        ]:
            with pytest.raises(Exception, match=message) as info:
                m.observe("a", 0.1, x=[0.3], t=1.0, constraints=bad)
            assert info.value.status == 422
            assert_states_equal(before, without_timings(m.policy_state("a")))
        assert [e.kind for e in m.history("a")] == ["observe"]
        m.create("plain", "gp-ucb", [[0.0], [1.0]], options=OPTIONS, clock="client")
        with pytest.raises(Exception) as info:
            m.observe("plain", 0.1, x=[0.3], t=1.0, constraints={"temperature": 1.0})
        assert info.value.status == 422
        assert m.history("plain") == []
    finally:
        m.store.close()


def test_constraints_over_http_and_in_the_csv(tmp_path):
    from dynbo.client import Client
    from tests.test_service_http import in_process

    with in_process(tmp_path / "s.sqlite", refit=False) as url:
        client = Client(url, retries=0)
        options = {**OPTIONS, "constraints": ["temperature"]}
        client.create_study("a", "gp-ucb", [[0.0], [1.0]], options=options, clock="client")
        answer = client.observe("a", 0.5, x=[0.9], t=0.0, constraints={"temperature": -0.2})
        assert answer["violated"] is True
        assert client.study("a")["violations"] == 1
        csv = client.history("a", format="csv")
        assert "constraints" in csv.splitlines()[0]
        assert '""temperature"": -0.2' in csv


def test_the_dashboard_marks_violations_in_a_real_browser(tmp_path, headless_chromium):
    from dynbo.service.dashboard import render_dashboard

    m = manager_at(tmp_path / "s.sqlite")
    try:
        constrained(m)
        for k, x in enumerate([0.1, 0.9, 0.5, 0.95]):
            m.observe("a", x, x=[x], t=float(k), constraints={"temperature": c(x)})
        page = tmp_path / "dashboard.html"
        page.write_text(render_dashboard(dashboard_data(m), 0))
    finally:
        m.store.close()
    driver = headless_chromium(1200, 900)
    driver.get(page.as_uri())
    marked = driver.find_elements("css selector", 'circle[data-series="constraint violated"]')
    assert len(marked) == 2  # x = 0.9 and 0.95
    assert "2 violated a constraint" in driver.find_element("css selector", "details").text
