"""Measuring the engine and the pipeline: the batch-size sweep of ``ttsfarm bench``, end-to-end
runs and the log-mel distance used by the scripts in ``benchmarks/``. The farm never imports it.
"""
