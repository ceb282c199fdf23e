"""Jinja2 templates for generated modules; installed as the package `srcgrad.templates`."""
