"""The ground floor: what every other part shares (settings, job types, errors, voices, timings,
mastering, encoding). It imports no other part of the project (``tests/test_architecture.py``)."""
