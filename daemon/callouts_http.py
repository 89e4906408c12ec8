"""The live callout port: a blocking HTTP POST with the standard library (urllib).

The daemon runs each session in a worker thread (runtime/session_loop.py, anyio.to_thread) and
`fumarole schedule` runs it on the main thread, so a blocking call bounded by the configured
timeout is what a session needs: no event loop is blocked and none has to be reached from the
thread.  As Go's `http.Client{Timeout}`, the timeout bounds the whole exchange (connect, headers,
body); 0 means none.  A non-200 status is answered without reading the body; a 200 body is
read up to Volcano's 10 MiB limit (maxBodySize), beyond which the answer is an error.  Proxies
from the environment are used except for loopback hosts (as Go's ProxyFromEnvironment).

The answer comes back in its recorded form (framework/callout.py `CalloutAnswer`: status, the
body as text, an error text): what the live session decides on is exactly what the log keeps.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request

from fumarole.daemon.scheduler.framework.callout import CalloutAnswer

__all__ = ["MAX_BODY", "HttpCalloutPort"]

MAX_BODY = 10 << 20
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


class HttpCalloutPort:
    """POST `body` as application/json; transport failures and timeouts become `error`."""

    def __init__(self) -> None:
        self._direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._proxied = urllib.request.build_opener()

    def call(self, verb: str, url: str, body: bytes, timeout_s: float, want_body: bool) -> CalloutAnswer:
        host = (urllib.parse.urlsplit(url).hostname or "").lower()
        opener = self._direct if host in _LOOPBACK or host.startswith("127.") else self._proxied
        req = urllib.request.Request(
            url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
        timeout_text = (
            f'Post "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
        )
        try:
            with opener.open(req, timeout=timeout_s if timeout_s > 0 else None) as resp:
                status = int(resp.status)
                if status != 200 or not want_body:
                    return CalloutAnswer(status=status)
                chunks: list[bytes] = []
                size = 0
                while size <= MAX_BODY:
                    if deadline is not None and time.monotonic() > deadline:
                        return CalloutAnswer(
                            error=f'Post "{url}": context deadline exceeded (Client.Timeout or context '
                            "cancellation while reading body)"
                        )
                    chunk = resp.read(min(65536, MAX_BODY + 1 - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
        except urllib.error.HTTPError as e:
            e.close()
            return CalloutAnswer(status=e.code)
        except TimeoutError:
            return CalloutAnswer(error=timeout_text)
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                return CalloutAnswer(error=timeout_text)
            return CalloutAnswer(error=f'Post "{url}": {e.reason}')
        except (OSError, ValueError) as e:
            return CalloutAnswer(error=f'Post "{url}": {e}')
        if deadline is not None and time.monotonic() > deadline:
            return CalloutAnswer(error=timeout_text)
        data = b"".join(chunks)
        if len(data) > MAX_BODY:
            return CalloutAnswer(status=status, error="http: request body too large")
        return CalloutAnswer(status=status, body=data.decode("utf-8", errors="replace"))
