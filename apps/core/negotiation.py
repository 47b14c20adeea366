from rest_framework.negotiation import BaseContentNegotiation


class JSONOnly(BaseContentNegotiation):
    """The API speaks JSON only: ignore Accept instead of answering 406 to `Accept: text/html`."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type
