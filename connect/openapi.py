"""The OpenAPI generator: drf-spectacular's, with the extensions that document our classes
registered before it runs.

drf-spectacular's extension base loads its `plumbing`, which imports `rest_framework.test` and
with it `django.test`, Jinja2, `unittest`, `requests` and PyYAML, which only schema generation
needs; so the extensions are imported here, by the module SPECTACULAR_SETTINGS names as the
generator, which the schema views (connect/schema.py) and `manage.py spectacular` both load
before they generate, and not at start-up.
"""

from __future__ import annotations

from drf_spectacular.generators import SchemaGenerator as SpectacularGenerator

from apps.access import openapi  # noqa: F401  registers the security scheme


class SchemaGenerator(SpectacularGenerator):
    """drf-spectacular's generator; importing this module registers our extensions."""
