"""The package stage: OUTDIR (generated adapters, stage reports) -> DIST, a flat folder of release files:

    <package>-<version>-py3-none-any.whl, <package>-<version>.tar.gz   per adapter
    <spec>-<report path under OUTDIR, "/" -> "-">                       each stage report, copied byte for byte
    <spec>-model-card.md
    SHA256SUMS                                                         every other file, `sha256sum -c` format

Flat because `integrate publish` uploads DIST's top-level files as release assets. Everything is built in a
temporary sibling of DIST and renamed into place (an existing DIST is replaced as a whole), so DIST is either the
old one or the complete new one.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from dayone.adapters.targets import common
from dayone.core.atomic import swap_in
from dayone.core.errors import InputError
from dayone.package import build, card, discover
from dayone.package.build import BuildError
from dayone.package.targets import TITLES, framework
from dayone.package.version import package_version, source_date_epoch
from dayone.release.assets import sha256_file
from dayone.spec.registry import MODELS_DIR, load_spec
from dayone.spec.schema import ModelSpec

SUMS = "SHA256SUMS"

__all__ = ["BuildError", "PackageResult", "package"]


@dataclass
class PackageResult:
    spec: str
    spec_digest: str
    revision: str | None
    dist: str
    source_date_epoch: int
    packages: list[dict] = field(default_factory=list)  # target, dist_name, package, version, wheel, sdist, framework
    reports: list[dict] = field(default_factory=list)  # {"source": path under OUTDIR, "file": name in DIST}
    model_card: str = ""
    files: dict[str, str] = field(default_factory=dict)  # name in DIST -> sha256 (SHA256SUMS itself included)

    def as_dict(self) -> dict:
        return asdict(self)


def package(
    outdir: Path,
    dist: Path,
    *,
    spec: ModelSpec | None = None,
    revision: str | None = None,
    public_version: bool = False,
    progress: Callable[[str], None] = lambda line: None,
) -> PackageResult:
    outdir, dist = Path(outdir), Path(dist)
    build.require_build()
    adapters = discover.find_adapters(outdir)
    spec, digest = _spec(adapters, spec, outdir)
    _check_dist(dist, outdir)
    reports = discover.find_reports(outdir, skip=[a.root for a in adapters] + [dist])
    epoch = source_date_epoch()
    versions = {a.target: package_version(a.generator_version, digest, revision, public_version) for a in adapters}
    generator = adapters[0].generator_version
    result = PackageResult(spec.name, digest, revision, str(dist), epoch)

    dist.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dist.name}.tmp-", dir=dist.parent))
    try:
        infos = []
        for adapter in adapters:
            progress(f"building {adapter.target}")
            infos.append(_build_one(adapter, spec, digest, revision, versions[adapter.target], epoch, tmp))
        named = _copy_reports(reports, spec, tmp, taken={p.name for p in tmp.iterdir()})
        card_name = f"{spec.name}-model-card.md"
        text = card.model_card(spec, infos, named, spec_digest=digest, generator_version=generator, revision=revision)
        (tmp / card_name).write_text(text)
        result.files = write_sums(tmp)
        tmp.chmod(0o755)
        swap_in(tmp, dist)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result.packages = [
        {"target": i.target, "dist_name": i.dist_name, "package": i.package, "version": i.version, "wheel": i.wheel,
         "sdist": i.sdist, "framework": i.framework.as_dict()}
        for i in infos
    ]  # fmt: skip
    result.reports = [{"source": f.rel, "file": name} for name, f in named]
    result.model_card = card_name
    return result


def _spec(adapters: list[discover.Adapter], given: ModelSpec | None, outdir: Path) -> tuple[ModelSpec, str]:
    """The spec the adapters were generated from: the one given (--spec), else the spec file generate wrote beside
    them (a spec that is not shipped: derived from a checkpoint), else the shipped spec their headers name; its
    digest must be the one in the headers (adapters generated from an older spec, or another one, are refused)."""
    names = sorted({a.spec_name for a in adapters})
    written = outdir / common.SPEC_FILE
    if given is None:
        if len(names) > 1:
            raise InputError(
                f"adapters generated from different specs ({', '.join(names)}): package one spec at a time"
            )
        if written.is_file() and (beside := load_spec(written)).name == names[0]:
            given = beside
        elif not (MODELS_DIR / f"{names[0]}.yaml").is_file():
            raise InputError(
                f"{adapters[0].root}: generated from spec {names[0]!r}, which is not shipped, and {written} is "
                "missing (generate writes it): pass --spec FILE"
            )
    spec = given or load_spec(names[0])
    digest = common.spec_digest(spec)
    for a in adapters:
        if (a.spec_name, a.spec_digest) != (spec.name, digest):
            raise InputError(
                f"{a.root}: generated from spec {a.spec_name} (sha256 {a.spec_digest}), not from "
                f"{spec.name} (sha256 {digest}): regenerate it or pass the spec it came from"
            )
    return spec, digest


def _check_dist(dist: Path, outdir: Path) -> None:
    if dist.exists() and not dist.is_dir():
        raise InputError(f"{dist}: exists and is not a folder")
    if dist.resolve() == outdir.resolve() or outdir.resolve().is_relative_to(dist.resolve()):
        raise InputError(f"{dist}: would replace OUTDIR {outdir}; choose another -o")
    # DIST is replaced as a whole: refuse a folder that cannot be an earlier DIST (it would hold no sub-folders).
    if dist.is_dir() and any(p.is_dir() for p in dist.iterdir()):
        raise InputError(f"{dist}: has sub-folders, so it is not a package output to replace; choose another -o")


def _build_one(adapter, spec, digest, revision, version: str, epoch: int, out: Path) -> card.PackageInfo:
    package = adapter.packages[0]
    info = card.PackageInfo(
        adapter.target, TITLES[adapter.target], package.replace("_", "-"), package, version, framework(adapter.target)
    )
    readme = card.readme(spec, info, spec_digest=digest, generator_version=adapter.generator_version, revision=revision)
    with tempfile.TemporaryDirectory(prefix="dayone-package-") as src:
        data = build.stage_source(adapter, Path(src), {"README.md": readme}, epoch)
        pyproject = common.render(
            "package/pyproject.toml.j2", spec=spec, spec_digest=digest, dist_name=info.dist_name, version=version,
            description=f"{spec.name} ({spec.hf.architecture}) for {info.title}, generated by dayone",
            requirements=adapter.requirements, framework=info.framework, target=adapter.target,
            entry_points=adapter.entry_points, packages=adapter.packages, package_data=data,
        )  # fmt: skip
        build._write(Path(src) / "pyproject.toml", pyproject.encode(), epoch)
        wheel, sdist = build.run_build(Path(src), out, epoch, info.dist_name)
    return replace(info, wheel=wheel.name, sdist=sdist.name)


def _copy_reports(reports, spec: ModelSpec, out: Path, taken: set[str]) -> list[tuple[str, discover.ReportFile]]:
    named = []
    for f in reports:
        name = f"{spec.name}-{f.rel.replace('/', '-')}"
        if name in taken or name == SUMS:
            raise InputError(f"{f.path}: its name in DIST, {name}, is taken by another file; rename the report")
        taken.add(name)
        build.copy_file(f.path, out / name)
        named.append((name, f))
    return named


def write_sums(folder: Path) -> dict[str, str]:
    """SHA256SUMS over every other file of folder, sorted by name; returns {name: sha256} including SHA256SUMS."""
    sums = {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != SUMS}
    for name in sums:
        if any(c in name for c in "\\\n\r"):  # sha256sum escapes these; our names never have them
            raise InputError(f"{name}: a file name SHA256SUMS cannot list plainly")
    (folder / SUMS).write_text("".join(f"{digest}  {name}\n" for name, digest in sums.items()))
    for p in folder.iterdir():
        p.chmod(0o644)
    return {**sums, SUMS: sha256_file(folder / SUMS)}
