"""Errors of the model layer.

    LLMError                      root; `code` is stable and shown to clients
    ├── ProviderUnreachable       connection refused, DNS, TLS       provider_unreachable
    ├── ProviderTimeout           connect, a read, or the whole call  provider_timeout
    ├── ProviderHTTPError         a non-2xx answer                   provider_error
    ├── ProviderDisconnected      the stream ended before it finished provider_disconnected
    └── MalformedStream           bytes that are not the protocol    provider_malformed_stream

Vendor exceptions (httpx) are re-raised `from exc`.
"""

from __future__ import annotations


class LLMError(Exception):
    code = "provider_error"

    @property
    def brief(self) -> str:
        """What a log line at the default level may say: the code, never the provider's words
        (an error body or a broken stream can echo the user's messages or the model's)."""
        return self.code


class ProviderUnreachable(LLMError):
    code = "provider_unreachable"


class ProviderTimeout(LLMError):
    code = "provider_timeout"


class ProviderHTTPError(LLMError):
    code = "provider_error"

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"provider answered HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body

    @property
    def brief(self) -> str:
        return f"{self.code} (HTTP {self.status})"


class MalformedStream(LLMError):
    code = "provider_malformed_stream"


class ProviderDisconnected(LLMError):
    code = "provider_disconnected"


# 4xx answers that are about the request as a whole, not about one of its inputs: auth, a
# missing model, rate limits. They are treated as the provider failing.
_NOT_ABOUT_THE_INPUT = frozenset({401, 403, 404, 408, 429})


def rejects_input(exc: BaseException) -> bool:
    """Whether the provider refused what it was given (blame the input) rather than failed
    (timeouts, unreachable, 5xx, auth, rate limits: blame nobody, back off)."""
    if isinstance(exc, MalformedStream):
        return True
    return (isinstance(exc, ProviderHTTPError) and 400 <= exc.status < 500
            and exc.status not in _NOT_ABOUT_THE_INPUT)
