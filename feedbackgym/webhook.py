"""An alert channel: each alert POSTed as JSON to a webhook, off the training thread.

:class:`Webhook` is a hook for :class:`~feedbackgym.control.RewardDropAlert`
(the config's ``alert.webhook``): when the alert fires it sends
``{"source": "feedbackgym", "kind": "reward_drop", "round": r, "message": m}``
to the URL (Slack-style incoming webhooks, an alert manager, a chat bot's
endpoint). A send runs in a daemon thread with a timeout, so a slow or dead
endpoint never stalls training; a failure is logged and counted, never raised.

Example:
    >>> channel = Webhook("http://127.0.0.1:9/alerts", timeout_s=0.5)  # nothing listens
    >>> channel(3, "mean reward fell").join()
    >>> channel.sent, channel.failed
    (0, 1)
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from urllib.parse import urlsplit

__all__ = ["Webhook", "checked_webhook_url"]

logger = logging.getLogger(__name__)


def checked_webhook_url(url: str) -> str:
    """``url``, if it is an ``http`` or ``https`` URL with a host.

    Raises:
        ValueError: It is not.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a webhook must be an http(s) URL with a host, got {url!r}")
    return url


class Webhook:
    """POSTs each alert to ``url`` as JSON, in a thread of its own.

    Args:
        url: The endpoint (``http`` or ``https``).
        timeout_s: How long one send may take.

    Attributes:
        sent: Alerts the endpoint accepted (a 2xx answer).
        failed: Alerts that did not get through (logged as warnings).

    Raises:
        ValueError: ``url`` is not an http(s) URL, or ``timeout_s`` is not positive.
    """

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        if not timeout_s > 0:
            raise ValueError(f"webhook timeout_s must be > 0, got {timeout_s}")
        self.url = checked_webhook_url(url)
        self.timeout_s = timeout_s
        self.sent = 0
        self.failed = 0
        self._lock = threading.Lock()

    def __call__(self, round_: int, message: str) -> threading.Thread:
        """Starts sending one alert; returns the sending thread (join it to wait)."""
        body = {"source": "feedbackgym", "kind": "reward_drop", "round": round_, "message": message}
        thread = threading.Thread(
            target=self._send, args=(json.dumps(body).encode(),), name="feedbackgym-webhook"
        )
        thread.daemon = True
        thread.start()
        return thread

    def _send(self, data: bytes) -> None:
        request = urllib.request.Request(
            self.url, data=data, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                ok = 200 <= response.status < 300
                reason = f"HTTP {response.status}"
        except (urllib.error.URLError, OSError, ValueError) as error:
            ok, reason = False, str(getattr(error, "reason", error))
        with self._lock:
            if ok:
                self.sent += 1
            else:
                self.failed += 1
        if not ok:
            logger.warning("the alert did not reach %s: %s", self.url, reason)
