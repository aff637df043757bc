"""`integrate package`: release files for generated adapters. For each adapter `integrate generate` wrote under
OUTDIR, a wheel and an sdist (PyPA `build`, deterministic); the stage reports found beside them; a model card; and
SHA256SUMS over everything. See docs/package.md.

    discover.py  what OUTDIR holds: adapters, their spec and generator version, stage reports
    version.py   the version scheme and the build timestamp (SOURCE_DATE_EPOCH)
    targets.py   per target: the framework pin (the release the static check used) and its extra
    build.py     one adapter -> a staged source tree -> PyPA build (pep517.py) -> normalised sdist
    card.py      the model card and the package READMEs
    stage.py     the whole stage, into a temporary folder renamed into place
"""

from dayone.package.stage import BuildError, PackageResult, package

__all__ = ["BuildError", "PackageResult", "package"]
