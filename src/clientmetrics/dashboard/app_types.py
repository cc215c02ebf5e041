"""The dashboard's response type, shared by the router and the pages that answer POSTs."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Response", "html", "redirect"]


@dataclass(frozen=True, slots=True)
class Response:
    """An HTTP response body with its status, type and extra headers."""

    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


def html(text: str, status: int = 200) -> Response:
    """An HTML page."""
    return Response(status, text.encode("utf-8"))


def redirect(location: str, cookie: str | None = None) -> Response:
    """303 See Other (after a POST), setting ``cookie`` when given."""
    headers = [("Location", location)]
    if cookie is not None:
        headers.append(("Set-Cookie", cookie))
    return Response(303, b"", "text/plain; charset=utf-8", tuple(headers))
