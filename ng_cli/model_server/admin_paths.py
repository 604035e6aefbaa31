"""The admin routes' paths, by name: what the launcher and the training client need of them,
importable without FastAPI or the weight updater (`admin_routes` serves them)."""

from __future__ import annotations

__all__ = ["ADMIN_ROUTES"]

ADMIN_ROUTES = {
    "weights": "/admin/weights",
    "update": "/admin/weights/update",
    "begin": "/admin/weights/begin",
    "push": "/admin/weights/push/{route}",
    "commit": "/admin/weights/commit",
    "abort": "/admin/weights/abort",
    "sleep": "/admin/sleep",
    "wake_up": "/admin/wake_up",
}
"""The routes, by name (the head server lists them for a model server that takes updates)."""
