"""Small helpers shared by console views."""

from __future__ import annotations

from typing import TypeVar

from django.http import Http404
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers

PAGE_SIZE = 50

T = TypeVar("T")


def or_404(found: T | None) -> T:
    """What a selector found, or the site's 404 page when it found nothing (selectors answer None;
    only a view knows the answer is a page)."""
    if found is None:
        raise Http404()
    return found


def error_page(request, *, status: int, title: str, detail: str = "", code: str = "", field: str = ""):
    """A console-styled error page. ``detail`` is fixed text chosen by the view, never input; ``field``
    names the refused field of an ``invalid_request`` (a name chosen by the code, never a value)."""
    response = render(
        request,
        "console/error.html",
        {"status": status, "title": title, "detail": detail, "code": code, "field": field},
        status=status,
    )
    add_never_cache_headers(response)
    return response
