"""``dynbo serve``: a crash-safe HTTP/JSON ask/tell service (the ``serve`` extra).

* :mod:`dynbo.service.storage`: the SQLite file (studies, event log, checkpoints);
* :mod:`dynbo.service.studies`: the study manager (per-study locks, rebuild by replay);
* :mod:`dynbo.service.app`: the FastAPI application and ``serve`` (uvicorn);
* :mod:`dynbo.service.security`: the request guard (token, Host, Origin, content type,
  body size) and the CSV cells' neutralization;
* :mod:`dynbo.service.http`: uvicorn's h11 protocol with header and body timeouts and a
  connection limit;
* :mod:`dynbo.service.dashboard`: the dashboard page.

``dynbo.client.Client`` talks to it. FastAPI and uvicorn are imported only by
:mod:`dynbo.service.app` and :mod:`dynbo.service.http` (``pip install 'dynbo[serve]'``).
See ``docs/live.md``.
"""

from dynbo.service.storage import ServiceStore
from dynbo.service.studies import StudyManager

__all__ = ["ServiceStore", "StudyManager", "create_app", "serve"]


def __getattr__(name: str):  # noqa: ANN202 - lazy: FastAPI only when the app is wanted
    if name in ("create_app", "serve"):
        from dynbo.service import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
