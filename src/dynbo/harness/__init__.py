"""The evaluation harness: clocks, the run loop, the result store and campaigns.

The names below are imported on first use (PEP 562): a command that only reads a store
(``dynbo show``) imports the store, not the run loop with torch and the policies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dynbo.harness.campaign import (
        DEFAULT_RESPONSE_TIME,
        Campaign,
        CampaignOutcome,
        build_campaign,
        connect_scheduler,
        load_campaign,
        make_protocol,
        run_campaign,
        validate_campaign,
    )
    from dynbo.harness.clocks import (
        CLOCK_MODES,
        Clock,
        ResponseTimeModel,
        fit_cubic,
        load_calibration,
    )
    from dynbo.harness.loop import Protocol, RunResult, RunSpec, execute, summarize
    from dynbo.harness.store import Store

#: public name -> the submodule that defines it
_SOURCES = {
    "DEFAULT_RESPONSE_TIME": "campaign",
    "Campaign": "campaign",
    "CampaignOutcome": "campaign",
    "build_campaign": "campaign",
    "connect_scheduler": "campaign",
    "load_campaign": "campaign",
    "make_protocol": "campaign",
    "run_campaign": "campaign",
    "validate_campaign": "campaign",
    "CLOCK_MODES": "clocks",
    "Clock": "clocks",
    "ResponseTimeModel": "clocks",
    "fit_cubic": "clocks",
    "load_calibration": "clocks",
    "Protocol": "loop",
    "RunResult": "loop",
    "RunSpec": "loop",
    "execute": "loop",
    "summarize": "loop",
    "Store": "store",
}

__all__ = [
    "CLOCK_MODES",
    "Campaign",
    "CampaignOutcome",
    "Clock",
    "DEFAULT_RESPONSE_TIME",
    "Protocol",
    "ResponseTimeModel",
    "RunResult",
    "RunSpec",
    "Store",
    "build_campaign",
    "connect_scheduler",
    "execute",
    "fit_cubic",
    "load_calibration",
    "load_campaign",
    "make_protocol",
    "run_campaign",
    "summarize",
    "validate_campaign",
]
assert sorted(__all__) == sorted(_SOURCES)


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'dynbo.harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"dynbo.harness.{source}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SOURCES))
