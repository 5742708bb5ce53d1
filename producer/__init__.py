"""Producer side of ttsfarm: submit text jobs to the farm and follow them by id."""

from producer.client import Client, JobSpec
from ttsfarm.core.errors import JobFailed, WaitTimeout
from ttsfarm.core.jobs import JobResult, JobStatus, SegmentTiming

__all__ = ["Client", "JobFailed", "JobResult", "JobSpec", "JobStatus", "SegmentTiming", "WaitTimeout"]
