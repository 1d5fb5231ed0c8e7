"""A whole Accel-Sim / GPGPU-Sim ``gpgpusim.config`` for the measured board: the tested base
configuration shipped with the package (configs/, BSD-3-Clause, source commit in its head),
with every option the run determines (accelsim.fragment) substituted in place, each such line
commented with its source figure and the base's value it replaces. The result parses on its
own (no base file to merge it after): tools/accel-sim/check_config.py feeds it alone to
gpgpu-sim's option parser.

One base serves every sm_90 board: the tested SM90 config of the simulator the parser harness
builds; why not upstream's newer per-board configs is in docs/models.md ("The base").
"""
from __future__ import annotations

from pathlib import Path

from . import accelsim
from . import accelsim_rules as rules

BASE_FILE = Path(__file__).with_name("configs") / "SM90_H100.gpgpusim.config"
BASE_COMMIT = "fa235ebcf932f82391bf8ccc9a0f69295fab6825"


def base_text() -> str:
    return BASE_FILE.read_text()


def _blocks(text: str) -> list[tuple[str | None, list[str]]]:
    """The lines of a config grouped as gpgpu-sim's parser reads them: (option name, its
    lines) for an option (a value opened by '"' runs on to the line that closes it), (None,
    [line]) for anything else."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        words = lines[i].split("#", 1)[0].split()
        if not words or not words[0].startswith("-"):
            out.append((None, [lines[i]]))
            i += 1
            continue
        j = i
        value = " ".join(words[1:])
        while value.startswith('"') and (value.count('"') < 2) and j + 1 < len(lines):
            j += 1
            value += " " + lines[j].split("#", 1)[0].strip()
        out.append((words[0], lines[i:j + 1]))
        i = j + 1
    return out


def _fragment_options(fragment: str) -> dict[str, tuple[str, str]]:
    """Option -> (value, comment) of the fragment's option lines."""
    out = {}
    for line in fragment.splitlines():
        if line.startswith("-"):
            head, _, note = line.partition("  # ")
            name, value = head.split(None, 1)
            out[name] = (value.strip(), note.strip())
    return out


def whole(params: dict, results: list[dict], meta: dict, base: str | None = None) -> str:
    """The base config with the run's options (accelsim.fragment of the same arguments)
    substituted: an option the base sets is replaced where it stands, its comment naming the
    source figure and the base's value; one the base lacks is added at the end; the fragment's
    notes (what was not written, the pipelines, what no option takes) follow it."""
    base = base_text() if base is None else base
    frag = accelsim.fragment(params, results, meta)
    subs = _fragment_options(frag)
    base_opts = rules.options(base)
    out = _header(meta, params, subs)
    done = set()
    for name, lines in _blocks(base):
        if name in subs and name not in done:
            value, note = subs[name]
            was = " ".join(base_opts.get(name, "").split())
            out.append(f"{name} {value}  # gpuchar: {note}; {rules.BASE_NAME} had {was}")
            done.add(name)
        elif name in subs:
            out.append(f"# (a later {name} of the base left out: set above)")
        else:
            out.extend(lines)
    extra = [n for n in subs if n not in done]
    if extra:
        out.append("")
        out.append(f"# --- options {rules.BASE_NAME} does not set, written by gpuchar ---")
        out.extend(f"{n} {subs[n][0]}  # gpuchar: {subs[n][1]}" for n in extra)
    out.append("")
    out.append("# --- gpuchar: the run's notes (what was not written and why, pipelines) ---")
    notes = frag.splitlines()
    first = next((i for i, line in enumerate(notes) if line.startswith("# ---")), len(notes))
    out.extend(line for line in notes[first:] if line.startswith("#"))
    return "\n".join(out) + "\n"


def _header(meta: dict, params: dict, subs: dict) -> list[str]:
    return [
        f"# Accel-Sim gpgpusim.config for {meta.get('device', '?')} "
        f"({params.get('arch') or meta.get('arch', '?')}), written by pytest-gpuchar "
        f"(gpuchar-model-params --format accel-sim)",
        f"# from the run of {meta.get('date', '?')} (driver {meta.get('driver', '?')}, "
        f"ptxas {meta.get('ptxas', '?')}, {meta.get('sm_count', '?')} SMs): a whole config,",
        f"# read alone. Base: {rules.BASE_NAME} of accel-sim/gpgpu-sim_distribution at "
        f"{BASE_COMMIT[:8]}",
        "# (configs/tested-cfgs/SM90_H100/gpgpusim.config, BSD-3-Clause: its notice follows).",
        f"# {len(subs)} options substituted in place, each line marked 'gpuchar:' with its "
        f"source figure",
        "# and the base's value. DRAM: the clock is raised to give the documented peak with "
        "the base's",
        "# channels, and the DRAM timings are scaled with it so each keeps its nanoseconds.",
        "#",
    ]


__all__ = ["BASE_FILE", "BASE_COMMIT", "base_text", "whole"]
