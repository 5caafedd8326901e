"""Sphinx configuration of the dynbo documentation site.

Build it with ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (the ``docs``
extra installs Sphinx and its extensions). The pages are Markdown (MyST), so the same
files read well on GitHub; the API reference is generated from the Google-style
docstrings by autodoc and napoleon.
"""

import inspect
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

# The API reference: members in source order, the docstrings are Google style.
autodoc_default_options = {
    "members": True,
    "member-order": "bysource",
    "show-inheritance": True,
}
autodoc_typehints = "description"
# types only for the documented parameters (no "args (Any)" for a generic __new__)
autodoc_typehints_description_target = "documented"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

html_theme = "alabaster"
html_title = f"dynbo {release}"
html_static_path: list[str] = []


def _constructor_signature(app, what, name, obj, options, signature, return_annotation):
    """Show a class's ``__init__`` arguments where a generic ``__new__`` would hide them.

    ``Policy.__new__(cls, *args, **kwargs)`` records every constructor argument (for
    ``from_state_dict``); autodoc would show that catch-all instead of the options.
    """
    if what != "class" or signature != "(*args, **kwargs)":
        return None
    init = getattr(obj, "__init__", None)
    if init is None or init is object.__init__:
        return None
    try:
        parameters = list(inspect.signature(init).parameters.values())[1:]  # no self
    except (TypeError, ValueError):
        return None
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in parameters]
    return str(inspect.Signature(bare)), None


def _no_inline_attribute_type(app, what, name, obj, options, lines):
    """Undo napoleon's reading of an attribute's text before its first colon as a type.

    dynbo's attributes and properties take their types from annotations (autodoc shows
    them); their comments are prose in which a colon is punctuation, which napoleon
    splits off as ``:type:``. Runs after napoleon (priority 600) and joins the text back.
    """
    if what not in ("attribute", "data", "property"):
        return
    typed = [i for i, line in enumerate(lines) if line.startswith(":type: ")]
    if len(typed) != 1 or not lines:
        return
    i = typed[0]
    head = lines[i].removeprefix(":type: ")
    body = [line for line in lines[:i]]
    while body and not body[-1].strip():
        body.pop()
    lines[:] = [f"{head}: {body[0]}" if body else head, *body[1:], *lines[i + 1 :]]


def setup(app):
    """Register the autodoc hooks above."""
    app.connect("autodoc-process-signature", _constructor_signature)
    app.connect("autodoc-process-docstring", _no_inline_attribute_type, priority=600)
