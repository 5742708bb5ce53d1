"""The HTTP gateway of ttsfarm: jobs, OpenAI's speech API and API keys over HTTP.

Only this package imports FastAPI; it submits through ``producer.Client`` like any producer.
"""

from gateway.app import app_from_env, create_app
from gateway.keys import KeyStore

__all__ = ["KeyStore", "app_from_env", "create_app"]
