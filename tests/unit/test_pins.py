"""One source of the pins: pyproject.toml lists what the product and the image install (the judge engines pinned in
its judges extra), constraints.txt the version of every package of that closure, and the Dockerfile installs
pyproject.toml's list under constraints.txt, naming no version of its own."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is no exact pin"
            pins[canonicalize_name(name)] = version
    return pins


def test_every_requirement_the_image_installs_is_pinned_and_the_pin_satisfies_it() -> None:
    pins = constraints()
    for text in [*project()["dependencies"], *project()["optional-dependencies"]["judges"]]:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"constraints.txt pins no {req.name} (pyproject.toml asks for {text!r})"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}: constraints.txt pins {pins[name]}, pyproject.toml asks {text!r}"


def test_the_judges_extra_pins_exactly_what_constraints_pins() -> None:
    pins = constraints()
    for text in project()["optional-dependencies"]["judges"]:
        req = Requirement(text)
        exact = [s.version for s in req.specifier if s.operator == "=="]
        assert exact == [pins[canonicalize_name(req.name)]], text


def test_the_dockerfile_installs_pyprojects_list_under_the_constraints_and_pins_nothing_itself() -> None:
    docker = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "--constraint /action/constraints.txt" in docker
    assert "['optional-dependencies']['judges']" in docker and "p['dependencies']" in docker
    assert not re.search(r"[A-Za-z0-9_.-]+==[0-9]", docker), "a version written in the Dockerfile: pin it in pyproject.toml"


def test_the_schemas_the_package_ships_are_files_in_it_and_the_top_level_names_lead_there() -> None:
    for name in ("config.schema.json", "report.schema.json"):
        inside = ROOT / "gate" / name
        assert inside.is_file() and not inside.is_symlink(), f"gate/{name} must be the file itself (the image copies gate/)"
        top = ROOT / name
        assert top.resolve() == inside.resolve(), f"{name} at the top level must lead to gate/{name}"
