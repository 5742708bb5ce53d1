"""Worker side of ttsfarm: the synthesis engine, the batcher, the job pipeline and Celery tasks.

Modules are imported on demand: importing ``worker`` alone loads nothing heavy.
"""
