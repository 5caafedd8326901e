"""The evaluation harness: clocks, the run loop, the result store and campaigns."""

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
from dynbo.harness.clocks import CLOCK_MODES, Clock, ResponseTimeModel, fit_cubic, load_calibration
from dynbo.harness.loop import Protocol, RunResult, RunSpec, execute, summarize
from dynbo.harness.store import Store

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
