"""Errors as the gateway answers them: JSON in OpenAI's shape, never internals.

Every error body is ``{"error": {"message": ..., "type": ..., "code": ...}}``, the shape OpenAI's
clients read, so their exceptions carry the message. Failures of the farm's Redis or storage
answer 503 with a fixed sentence (their messages name hosts and may hold passwords; the gateway
logs them instead), anything unexpected answers 500, and every message that does go out has any
``user:password@`` taken out of its URLs. A full queue answers 503 with ``Retry-After``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ttsfarm.core.errors import (
    Cancelled,
    InvalidInput,
    JobFailed,
    JobNotFound,
    PermanentError,
    QueueFull,
    TransientError,
    TtsfarmError,
    WaitTimeout,
)
from ttsfarm.core.jobs import check_unicode
from ttsfarm.core.redact import redact

log = logging.getLogger(__name__)

UNAVAILABLE_MESSAGE: Final = "the farm's queue or storage cannot be reached just now: try again shortly"
INTERNAL_MESSAGE: Final = "internal error: the gateway's log has the details"
QUEUE_FULL_RETRY_SECONDS: Final = 30
"""``Retry-After`` of a submit refused because the farm's queue is full."""
_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "service_unavailable",
    504: "timeout_error",
}


class ApiError(Exception):
    """An answer other than success, with a message for the caller."""

    def __init__(
        self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers


ECHO_CHARS: Final = 60
"""How much of a long value an error quotes back (a 10,000-character voice name, say)."""
_LONG = 2 * ECHO_CHARS
_LONG_QUOTED = re.compile(rf"'([^'\n]{{{_LONG},}})'|\"([^\"\n]{{{_LONG},}})\"")
_LONG_PATH = re.compile(rf"(?<= )(/\S{{{_LONG},}})")


def shortened(message: str) -> str:
    """``message`` with every long quoted value (and a long request path) cut to its start and
    its length: an error says what was wrong without sending the caller's input back whole."""

    def cut(found: re.Match[str]) -> str:
        value = next(group for group in found.groups() if group is not None)
        return f"'{value[:ECHO_CHARS]}...' ({len(value):,} characters)"

    message = _LONG_QUOTED.sub(cut, message)
    return _LONG_PATH.sub(lambda found: f"{found[1][:ECHO_CHARS]}... ({len(found[1]):,} characters)", message)


NO_RETRY: Final = {"x-should-retry": "false"}
"""Tells OpenAI's clients not to retry an answer they would (a 5xx) when a retry would only queue
a second job: the first one failed for good, or is still running."""


def error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """The JSON body of an error answer."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": shortened(redact(message)), "type": kind, "code": code}}


def error_response(
    status: int, message: str, code: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(status, message, code), status_code=status, headers=headers)


def _status_of(error: Exception) -> tuple[int, str, str | None]:
    if isinstance(error, ApiError):
        return error.status, error.message, error.code
    if isinstance(error, JobNotFound):
        return 404, str(error), "job_not_found"
    if isinstance(error, WaitTimeout):
        return 504, str(error), "timeout"
    if isinstance(error, Cancelled):
        return 409, str(error), "cancelled"
    if isinstance(error, JobFailed):
        return 500, str(error), "job_failed"
    if isinstance(error, PermanentError):
        return 400, str(error), None
    if isinstance(error, QueueFull):
        return 503, str(error), "queue_full"
    if isinstance(error, TransientError):
        log.warning("farm unavailable: %s", error)
        return 503, UNAVAILABLE_MESSAGE, "unavailable"
    return 500, INTERNAL_MESSAGE, None  # Starlette raises it on to the server, which logs it


async def _on_error(request: Request, error: Exception) -> JSONResponse:
    status, message, code = _status_of(error)
    headers = getattr(error, "headers", None)
    if isinstance(error, QueueFull):
        headers = {"Retry-After": str(QUEUE_FULL_RETRY_SECONDS)}
    if isinstance(error, JobFailed):  # the same request fails the same way: a retry only adds a job
        headers = NO_RETRY
    return error_response(status, message, code, headers)


async def _on_http(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    detail = error.detail if isinstance(error.detail, str) else "request refused"
    if error.status_code == 404:
        detail = f"no such endpoint: {request.method} {request.url.path} (see /openapi.json)"
    return error_response(error.status_code, detail, headers=error.headers)


async def _on_invalid(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    problems = [_describe(problem) for problem in error.errors()]
    return error_response(400, "invalid request: " + "; ".join(problems[:5]), "invalid_body")


def _describe(problem: Any) -> str:
    where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
    message = str(problem.get("msg", "invalid"))
    if problem.get("type") == "json_invalid":
        return "the body is not valid JSON"
    if problem.get("type") == "model_attributes_type":
        return "the body must be a JSON object, sent as Content-Type: application/json"
    if problem.get("type") == "string_unicode" and isinstance(problem.get("input"), str):
        try:  # a lone surrogate in a field with a length limit: say where, as for the text
            check_unicode(problem["input"], where)
        except InvalidInput as error:
            return str(error)
    return f"{where}: {message}" if where else message


def install_handlers(app: FastAPI) -> None:
    """Answer every error raised in a route as JSON."""
    app.add_exception_handler(RequestValidationError, _on_invalid)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(ApiError, _on_error)
    app.add_exception_handler(TtsfarmError, _on_error)
    app.add_exception_handler(Exception, _on_error)
