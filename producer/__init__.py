"""Producer side of ttsfarm: submit text jobs to the farm and follow them by id."""

from producer.client import Client, JobFailed, JobSpec, WaitTimeout
from ttsfarm.jobs import JobResult, SegmentTiming
from ttsfarm.registry import JobStatus

__all__ = ["Client", "JobFailed", "JobResult", "JobSpec", "JobStatus", "SegmentTiming", "WaitTimeout"]
