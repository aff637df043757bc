"""Total deadlines for publishing: per request and per publish, whatever the server does.

requests' timeouts bound each wait for a byte, not the whole: a server that sends a status line and then one byte
every few seconds kept publish waiting for ever (245 s before it was killed). Here each request runs on a worker
thread that the caller stops waiting for at the request's deadline (the lesser of REQUEST_DEADLINE_S and what is
left of the publish's), and a streamed download checks the publish's deadline at every chunk. A request abandoned
at its deadline is not retried: only 5xx answers and connection resets are (dayone.release.github's Retry).
"""

from __future__ import annotations

import threading
import time

import requests
from requests.adapters import HTTPAdapter

REQUEST_DEADLINE_S = 120.0  # one API call or one asset upload, start to last byte
PUBLISH_DEADLINE_S = 1800.0  # the whole publish: every call, upload and download


class DeadlinePassed(requests.exceptions.ConnectionError, requests.exceptions.Timeout):
    """A request or the publish ran past its total deadline. A ConnectionError, so github3 reports it as one."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} ran past its {seconds:g} s deadline")
        self.what, self.seconds = what, seconds


class Deadline:
    """The publish's deadline, started when made."""

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = PUBLISH_DEADLINE_S if seconds is None else seconds
        self.at = time.monotonic() + self.seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def check(self) -> None:
        if self.left() <= 0:
            raise DeadlinePassed("the publish", self.seconds)


class DeadlineAdapter(HTTPAdapter):
    """An HTTPAdapter whose every request ends by its deadline, body included (unless streamed)."""

    def __init__(self, deadline: Deadline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.deadline = deadline

    def send(self, request, **kwargs):
        self.deadline.check()
        left = self.deadline.left()
        by_publish = left < REQUEST_DEADLINE_S  # which deadline ends this request
        budget = left if by_publish else REQUEST_DEADLINE_S
        outcome: dict = {}

        def work() -> None:
            try:
                response = HTTPAdapter.send(self, request, **kwargs)
                if not kwargs.get("stream"):
                    response.content  # noqa: B018 - the body is read here, inside the deadline
                outcome["response"] = response
            except BaseException as err:  # noqa: BLE001 - handed to the caller's thread as it is
                outcome["error"] = err

        worker = threading.Thread(target=work, name="dayone-publish-request", daemon=True)
        worker.start()
        worker.join(budget)
        if worker.is_alive():  # the thread is left to the server's hang-up; its connection is not reused
            if by_publish:
                raise DeadlinePassed("the publish", self.deadline.seconds)
            raise DeadlinePassed("a request", REQUEST_DEADLINE_S)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["response"]
