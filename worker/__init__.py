"""The Celery side of a farm worker: the app built from settings (``app``), the task (``tasks``),
running one job against the registry and storage (``jobs``), message leases, metrics and the
health probe. The synthesis itself lives in ``synthesis``.

Modules are imported on demand: importing ``worker`` alone loads nothing heavy.
"""
