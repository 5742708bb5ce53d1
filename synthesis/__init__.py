"""Speech synthesis without the farm: text to phonemes, batches, the ONNX Runtime engines, the
job pipeline and audio encoding. Nothing here imports Celery, Redis or boto3; the CLI, the
Celery worker (``worker``) and the benchmarks build a :class:`~synthesis.pipeline.Synthesizer`
from settings (``synthesis.build``) and hand it jobs.

Modules are imported on demand: importing ``synthesis`` alone loads nothing heavy.
"""
