"""What the scripts in ``benchmarks/`` share: end-to-end runs, the log-mel distance, and a farm
started for a run (an S3 endpoint and worker processes). Not installed: the scripts find it
beside them, the tests through pytest's ``pythonpath``. The batch-size sweep is ``ttsfarm
bench``'s own (``ttsfarm.cli.sweep``).
"""
