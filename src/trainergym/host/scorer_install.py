"""The scorer's own install on a GPU host, and the check that it still is what was installed.

The scorer runs from a venv of its own holding trainergym and the families: never prime-rl's,
which holds the job's package, and never writable by the trainer (`trainergym.host.confinement`).
Setup builds it once per host and then records the sha256 of every family package's files and
the family kit's (`record`). Before scoring, the scorer recomputes each recorded package's hash
where the import system will find it and refuses on any difference: a file changed, added or
removed, or a package found somewhere other than where it was recorded (a planted `.pth` or
path entry shadowing it); once the family is loaded it checks that the modules came from there
(`verify`, `check_loaded`). Bytecode caches are not hashed: the scorer runs with
`-X pycache_prefix` inside its install, so Python never reads a package's own `__pycache__`.

    python -m trainergym.host.scorer_install record          # at install time: <venv>/trainergym-packages.json
    python -m trainergym.host.scorer_install specs FAMILY    # the family's packages as installed here
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
from importlib import metadata
from pathlib import Path

RECORD_NAME = "trainergym-packages.json"
_GROUP = "trainergym.families"


class Untrusted(Exception):
    """What the scorer would load is not what was recorded when it was installed."""


def default_record() -> Path:
    """Where `record` writes and the scorer reads: beside the install's own `pyvenv.cfg`."""
    return Path(sys.prefix) / RECORD_NAME


def _requirement_names(dist: metadata.Distribution) -> list[str]:
    names = []
    for requirement in dist.requires or []:
        name = re.match(r"[A-Za-z0-9._-]+", requirement).group()
        if re.sub(r"[-_.]+", "-", name).lower().startswith("trainergym-"):  # the kit, by the families' naming
            names.append(name)
    return names


def packages() -> list[str]:
    """The import names the scorer must trust: every installed family's package (the scorer
    imports them all) and the trainergym-* packages they require (the kit)."""
    names = set()
    for ep in metadata.entry_points(group=_GROUP):
        names.add(ep.value.partition(":")[0].partition(".")[0])
        names |= {re.sub(r"[-.]+", "_", n).lower() for n in _requirement_names(ep.dist)}
    return sorted(names)


def _hash_tree(roots: list[Path]) -> str:
    """sha256 over every entry below `roots` (paths, kinds and bytes; links by their target, never
    followed), `__pycache__` directories left out."""
    h = hashlib.sha256()
    for index, root in enumerate(roots):
        if root.is_file() and not root.is_symlink():
            h.update(b"F\0" + root.read_bytes())
            continue
        for here, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            base = Path(here)
            for name in [*dirs, *sorted(files)]:
                path = base / name
                rel = f"{index}/{path.relative_to(root).as_posix()}".encode()
                if path.is_symlink():
                    h.update(b"L\0" + rel + b"\0" + os.readlink(path).encode() + b"\0")
                elif path.is_dir():
                    h.update(b"D\0" + rel + b"\0")
                elif path.is_file():
                    data = path.read_bytes()
                    h.update(b"F\0" + rel + b"\0" + str(len(data)).encode() + b"\0" + data)
                else:
                    h.update(b"O\0" + rel + b"\0")
    return h.hexdigest()


def digest(name: str) -> tuple[list[str], str]:
    """(where the import system finds package `name`, the sha256 of its files), found without
    importing it. Raises Untrusted when it cannot be found."""
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise Untrusted(f"package {name} is not installed")
    roots = [Path(p) for p in spec.submodule_search_locations or []] or ([Path(spec.origin)] if spec.origin else [])
    if not roots:
        raise Untrusted(f"package {name} has no files to check")
    return [str(r) for r in roots], _hash_tree(roots)


def record(path: Path | None = None) -> dict:
    """Hash every package `packages()` names, as installed now, and write the record to `path`
    (default `default_record()`). Returns it."""
    entries = {}
    for name in packages():
        locations, sha = digest(name)
        entries[name] = {"locations": locations, "sha256": sha}
    data = {"packages": entries}
    path = path or default_record()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)
    return data


def verify(path: Path | None = None) -> dict[str, list[str]]:
    """Check every recorded package (and that none the scorer would import is unrecorded)
    against the record at `path`, before anything imports them; returns where each is. Raises
    Untrusted naming the first difference."""
    path = path or default_record()
    try:
        recorded = json.loads(path.read_text())["packages"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise Untrusted(f"no readable record of the scorer's packages at {path} ({type(e).__name__})") from None
    unrecorded = sorted(set(packages()) - set(recorded))
    if unrecorded:
        raise Untrusted(f"{', '.join(unrecorded)} installed after the scorer's record was made")
    found = {}
    for name, entry in sorted(recorded.items()):
        locations, sha = digest(name)
        if locations != entry["locations"]:
            raise Untrusted(f"{name} would be imported from {', '.join(locations)}, not from where it was installed "
                            f"({', '.join(entry['locations'])})")
        if sha != entry["sha256"]:
            raise Untrusted(f"{name} at {', '.join(locations)} differs from its recorded hash")
        found[name] = locations
    return found


def check_loaded(found: dict[str, list[str]]) -> None:
    """After loading: every module of a verified package that is imported came from where it
    was verified. Raises Untrusted otherwise."""
    for module_name, module in list(sys.modules.items()):
        top = module_name.partition(".")[0]
        if top not in found:
            continue
        files = [getattr(module, "__file__", None), *list(getattr(module, "__path__", []) or [])]
        for file in filter(None, files):
            if not any(Path(file).is_relative_to(root) for root in found[top]):
                raise Untrusted(f"{module_name} was imported from {file}, outside {', '.join(found[top])}")


def specs(family_id: str) -> str:
    """The family's package and the trainergym-* packages it requires, as installed here, as pip
    specs: what prime-rl's env gets, so job code imports the family's public modules the scorer
    has (`trainergym.job.stack.install_spec`)."""
    from trainergym.job.stack import install_spec

    eps = [ep for ep in metadata.entry_points(group=_GROUP) if ep.name == family_id]
    if not eps:
        raise KeyError(f"unknown family {family_id!r}")
    dist = eps[0].dist
    return " ".join(install_spec(name) for name in [dist.metadata["Name"], *_requirement_names(dist)])


def main(argv: list[str] | None = None) -> int:
    """`record` (at install time) or `specs FAMILY` (printed); returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["record"] and len(args) in (1, 2):
        data = record(Path(args[1]) if len(args) == 2 else None)
        print(f"recorded {len(data['packages'])} packages: {', '.join(data['packages'])}")
        return 0
    if args[:1] == ["specs"] and len(args) == 2:
        print(specs(args[1]))
        return 0
    print("usage: python -m trainergym.host.scorer_install record [PATH] | specs FAMILY", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
