"""The store answers a campaign's labels from its own records, knowing nothing of
campaigns; stores written before labels were records still open and answer."""

import ast
import sqlite3
from pathlib import Path

import dynbo.harness.campaign as campaign_module
from dynbo.harness import Store
from dynbo.harness.campaign import record_missing_labels

STORE_MODULE = Path(campaign_module.__file__).with_name("store.py")
#: a store written by the version before label records (two campaigns sharing one run,
#: "first" labels its benchmark "h3", "relabelled" labels it "hartmann, 2-D")
PREVIOUS = Path(__file__).parent / "data" / "store_without_label_records.sql"
FIRST, RELABELLED = "85f406f90a11ff5f", "8fdb02b9b58bba8c"
RUN = "e62e7c77d9be86bc54dd"


def previous_store(tmp_path):
    path = tmp_path / "previous.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(PREVIOUS.read_text())
    conn.close()
    return path


def test_the_store_module_imports_no_campaign_module():
    tree = ast.parse(STORE_MODULE.read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "dynbo.harness.campaign" not in imported
    assert not any("campaign" in name for name in imported)


def test_labels_are_answered_from_the_records_without_building_a_campaign(tmp_path, monkeypatch):
    path = previous_store(tmp_path)
    with Store(path) as store:  # a writable open adds the label table
        store.link(FIRST, [RUN], {RUN: "h3"})
        store.link(RELABELLED, [RUN], {RUN: "hartmann, 2-D", "not-linked": "ignored"})

    def no_campaign(*args, **kwargs):
        raise AssertionError("the store built a campaign")

    monkeypatch.setattr(campaign_module, "build_campaign", no_campaign)
    with Store(path, read_only=True) as store:
        assert store.campaign_labels(FIRST) == {RUN: "h3"}
        assert store.campaign_labels(RELABELLED) == {RUN: "hartmann, 2-D"}
        assert [r["label"] for r in store.runs(RELABELLED)] == ["hartmann, 2-D"]
        assert set(store.iterations_frame(RELABELLED)["benchmark"]) == {"hartmann, 2-D"}
        assert store.unlabelled_campaigns() == []


def test_a_store_of_the_previous_layout_opens_and_answers(tmp_path):
    path = previous_store(tmp_path)
    with Store(path, read_only=True) as store:
        # no label records: each run shows the label it was stored with
        assert store.campaign_labels(RELABELLED) == {}
        assert [r["label"] for r in store.runs(FIRST)] == ["h3"]
        assert [r["label"] for r in store.runs(RELABELLED)] == ["h3"]
        assert [c["campaign_id"] for c in store.unlabelled_campaigns()] == [FIRST, RELABELLED]
        frame = store.runs_frame(FIRST)
        assert list(frame["run_id"]) == [RUN] and list(frame["benchmark"]) == ["h3"]
        assert len(store.iteration_rows([RUN])) == 9
    # the next campaign run on it (or this call) fills the records from each campaign's
    # stored configuration, and each campaign shows the run under its own label again
    with Store(path) as store:
        record_missing_labels(store)
        assert store.unlabelled_campaigns() == []
    with Store(path, read_only=True) as store:
        assert [r["label"] for r in store.runs(FIRST)] == ["h3"]
        assert [r["label"] for r in store.runs(RELABELLED)] == ["hartmann, 2-D"]
        assert list(store.runs_frame(RELABELLED)["benchmark"]) == ["hartmann, 2-D"]


def test_label_records_are_only_kept_for_linked_runs(tmp_path):
    with Store(previous_store(tmp_path)) as store:
        store.record_labels(FIRST, {"never-linked": "x"})
        assert store.campaign_labels(FIRST) == {}
