"""Producer side of ttsfarm: submit text jobs to the farm and follow them by id."""

from producer.client import Client, JobFailed, JobSpec, WaitTimeout
from ttsfarm.farm.registry import JobStatus
from ttsfarm.jobs import JobResult, SegmentTiming

__all__ = ["Client", "JobFailed", "JobResult", "JobSpec", "JobStatus", "SegmentTiming", "WaitTimeout"]
