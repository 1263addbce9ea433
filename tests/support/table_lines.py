"""Reading the terminal table: a row and the lines under it (a comparison, a reason, warnings, notes, goals that
would pass the table's 120 columns go there, indented 4 spaces, wrapped; a wrapped line's rest 6 spaces)."""

from __future__ import annotations

#: the terminal table's widest line
WIDTH = 120


def section(outlines: list[str]) -> list[str]:
    """The specperf section of a run's output after its title line: the diagnosis, the table and the note under
    it (not the lines naming the files written, whose paths are the user's)."""
    start = next(i for i, line in enumerate(outlines) if "= specperf =" in line)
    end = next((i for i, line in enumerate(outlines[start + 1:], start + 1) if line.startswith("=")
                or " written to " in line or line.startswith(("run saved as ", "run recorded as "))), len(outlines))
    return outlines[start + 1:end]


def block(lines: list[str], case: str) -> str:
    """The first table row naming ``case``, with the lines under it joined back into one text (a wrapped line's
    parts joined by a space, as they were split), each line's text after a space."""
    start = next(i for i, line in enumerate(lines) if line.startswith(("[", "  ")) and case in line
                 and not line.startswith("    "))
    out = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("    "):
            break
        if line.startswith("      ") and len(out) > 1:
            out[-1] += " " + line.strip()
        else:
            out.append(line.strip())
    return " | ".join(out)


def joined(lines: list[str], start: int) -> str:
    """A line wrapped under ``lines[start]`` (its rest indented) joined back into one."""
    out = lines[start]
    for line in lines[start + 1:]:
        if not line.startswith("  ") or line.startswith("  @") or line.startswith("  ["):
            break
        out += " " + line.strip()
    return out
