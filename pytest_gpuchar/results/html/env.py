"""The Jinja2 environment of the HTML pages: templates and the inline CSS and script shipped as
package data (results/html/templates, results/html/static), autoescaping, and the filters the
templates share. Any page (the run's report, the nightly, a history) renders through it."""
from __future__ import annotations

import functools
import math
from importlib import resources

import jinja2

from ..finite import number

PACKAGE = "pytest_gpuchar.results.html"


def num(v, digits: int = 4) -> str:
    """A figure as people read it: 4 significant digits, integers whole, "-" for none."""
    if v is None or v == "":
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if float(v).is_integer() and abs(v) < 1e12:
        return str(int(v))
    return f"{v:.{digits}g}"


def signed(v) -> str:
    return "-" if v is None else f"{v:+.3g}"


def sort_key(v) -> str:
    """The data-sort attribute of a numeric cell (empty: sorts last)."""
    x = number(v)
    return "" if x is None else repr(x)


def static(name: str) -> str:
    """The text of a file under results/html/static (CSS, the table-sorting script)."""
    return resources.files(PACKAGE).joinpath("static", name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader(PACKAGE, "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters.update(num=num, signed=signed, sort_key=sort_key)
    env.globals.update(static=static)
    return env


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)
