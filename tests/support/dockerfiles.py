"""The repository's Dockerfile, its .dockerignore and its requirement locks, read as Docker and pip read
them, for the tests that check and replay the image's build without a Docker engine."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).parents[2]


def instructions(dockerfile: Path = REPO / "Dockerfile") -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def stages(dockerfile: Path = REPO / "Dockerfile") -> list[list[tuple[str, str]]]:
    """Each stage's instructions, its FROM first; the ARGs before the first FROM are left out."""
    found: list[list[tuple[str, str]]] = []
    for instruction in instructions(dockerfile):
        if instruction[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


def _pattern(rule: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker matches it: Go's filepath.Match per path segment, where `*` and
    `?` stop at `/`, and a `**` segment stands for any number of directories."""
    parts = []
    for segment in rule.strip("/").split("/"):
        if segment == "**":
            parts.append("(?:[^/]+/)*")
            continue
        translated = "".join(
            "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char) for char in segment
        )
        parts.append(translated + "/")
    return re.compile("".join(parts).removesuffix("/"))


def context_files(root: Path = REPO) -> list[str]:
    """The files, relative to root, that `docker build root` sends: the last .dockerignore rule that
    matches a path or one of its parent directories decides, and a `!` rule takes the path back in."""
    lines = [line.strip() for line in (root / ".dockerignore").read_text().splitlines()]
    rules = [
        (line.startswith("!"), _pattern(line.removeprefix("!")))
        for line in lines
        if line and not line.startswith("#")
    ]
    kept_prefixes = [line.removeprefix("!").split("*", 1)[0] for line in lines if line.startswith("!")]

    def excluded(path: str) -> bool:
        candidates = [path] + [path.rsplit("/", depth)[0] for depth in range(1, path.count("/") + 1)]
        verdict = False
        for keep, pattern in rules:
            if any(pattern.fullmatch(candidate) for candidate in candidates):
                verdict = not keep
        return verdict

    files = []
    for folder, subfolders, names in os.walk(root):
        relative = Path(folder).relative_to(root).as_posix().removeprefix(".").lstrip("/")
        # An excluded folder that no `!` rule reaches into is not walked (.git, .venv).
        subfolders[:] = [
            name
            for name in subfolders
            if not excluded(f"{relative}/{name}".lstrip("/"))
            or any(prefix.startswith(f"{relative}/{name}/".lstrip("/")) for prefix in kept_prefixes)
        ]
        files += [path for name in names if not excluded(path := f"{relative}/{name}".lstrip("/"))]
    return sorted(files)


@dataclass(frozen=True)
class Pin:
    """One requirement of a lock written by `make lock` (uv pip compile --generate-hashes)."""

    name: str
    version: str
    hashes: tuple[str, ...]
    required_by: tuple[str, ...]  # the lock's `# via` notes: packages, or "promsched (pyproject.toml)"


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(lock: Path) -> dict[str, Pin]:
    """The lock's pins by normalized name."""
    pins: dict[str, Pin] = {}
    blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text())
    for block in blocks:
        requirement = re.match(r"([A-Za-z0-9][\w.-]*)==([^\s\\;]+)", block)
        if requirement is None:
            continue
        via = re.search(r"# via(.*?)(?:\n(?!\s*#)|\Z)", block, re.DOTALL)
        notes = re.sub(r"\n\s*#", "\n", via.group(1)) if via else ""
        pin = Pin(
            name=normalized(requirement.group(1)),
            version=requirement.group(2),
            hashes=tuple(re.findall(r"--hash=(\S+)", block)),
            required_by=tuple(note.strip() for note in notes.splitlines() if note.strip()),
        )
        pins[pin.name] = pin
    return pins
