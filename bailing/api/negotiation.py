"""Content negotiation of the hub's APIs: parsers by ``Content-Type`` as DRF does (else 415), and an
answer in the view's first renderer (JSON) whenever the ``Accept`` header names nothing it renders.

DRF's default raises ``NotAcceptable`` for ``Accept: text/html`` or ``text/event-stream``, which the
hub's exception handler does not know, so such a request was a 500. An agent API has one
representation; a client that asks for another still gets it, like every JSON API that ignores what
it cannot honour (RFC 9110 §12.5.1 allows answering with a default).
"""

from __future__ import annotations

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation


class AnswerJsonWhenUnmatched(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type
