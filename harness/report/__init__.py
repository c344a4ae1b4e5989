"""The HTML conformance report: one self-contained file rendered from a results document."""
from .html import build_data, render_html, repro_command, write_html

__all__ = ["build_data", "render_html", "repro_command", "write_html"]
