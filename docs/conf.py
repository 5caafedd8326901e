"""Sphinx configuration of the dynbo documentation site.

Build it with ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (the ``docs``
extra installs Sphinx and its extensions). The pages are Markdown (MyST), so the same
files read well on GitHub; the API reference is generated from the Google-style
docstrings by autodoc and napoleon.
"""

from importlib.metadata import version as _version

project = "dynbo"
author = "the dynbo authors"
copyright = "the dynbo authors"
release = _version("dynbo")
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

# Markdown pages (the existing docs/*.md stay plain GitHub-readable Markdown).
source_suffix = {".md": "markdown"}
root_doc = "index"
# results/ holds JSON and figures/ holds images: linked from the pages, never sources.
exclude_patterns = ["_build", "results", "figures", "Thumbs.db", ".DS_Store"]

# Heading anchors so that links such as `live.md#the-crash-safety-guarantee` resolve
# as they do on GitHub.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]

# The API reference: members in source order, the docstrings are Google style.
autodoc_default_options = {
    "members": True,
    "member-order": "bysource",
    "show-inheritance": True,
}
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

html_theme = "alabaster"
html_title = f"dynbo {release}"
html_static_path: list[str] = []
