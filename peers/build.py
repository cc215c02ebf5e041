"""Fetch and build the peers from their own pinned files, cached outside the clone.

Maven artifacts (``pom.xml`` + ``mvn dependency:copy-dependencies``), Maven projects
(``mvn package``), single Java sources (``javac``) and Go programs (``go build``) all land
in one cache folder keyed by a hash of what they are built from, so a second run (or a
second test process) reuses them and a changed pin rebuilds. Nothing is ever written into
the clone but Maven's own ``target/`` folders (ignored by git).

The cache is ``$CLIENTMETRICS_PEERS_CACHE`` or ``~/.cache/clientmetrics-peers``. A tool that
is missing, or a registry that cannot be reached, raises :class:`PeerUnavailable` with one
line saying what to install or what failed; the tests turn it into a skip with that reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class PeerUnavailable(RuntimeError):
    """A peer cannot be built or fetched here (a tool is missing, a registry refused)."""


def cache_root() -> Path:
    root = Path(
        os.environ.get("CLIENTMETRICS_PEERS_CACHE", Path.home() / ".cache" / "clientmetrics-peers")
    )
    root.mkdir(parents=True, exist_ok=True)
    return root


def require(tool: str, package: str) -> str:
    """The path of ``tool`` on PATH, or PeerUnavailable naming what provides it."""
    found = shutil.which(tool)
    if found is None:
        raise PeerUnavailable(f"{tool} is not installed (it comes with {package})")
    return found


def digest(paths: Iterable[Path], *extra: str) -> str:
    """A short hash of these files' names and contents (and of ``extra`` strings)."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    for text in extra:
        h.update(text.encode())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """One builder at a time for ``name`` across processes (tests run in several)."""
    with open(cache_root() / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(args: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, env=env, check=False, timeout=900
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise PeerUnavailable(f"{what} failed ({' '.join(args[:3])}...): " + " | ".join(tail))


def _cached(name: str, key: str, build: Callable[[Path], None]) -> Path:
    """``cache/name-key/``, made by ``build(tmp)`` once and renamed into place atomically."""
    target = cache_root() / f"{name}-{key}"
    if target.is_dir():
        return target
    with _locked(name):
        if target.is_dir():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_root()))
        try:
            build(tmp)
            tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        for stale in cache_root().glob(f"{name}-*"):
            if stale != target and stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
    return target


def maven_dependencies(pom: Path, name: str, properties: Mapping[str, str] | None = None) -> Path:
    """A folder holding every jar ``pom`` depends on (its own artifact excluded).

    ``properties`` override the POM's own (``-Dkafka.version=3.9.2``).
    """
    mvn = require("mvn", "Maven (apt-get install maven)")
    overrides = [f"-D{key}={value}" for key, value in sorted((properties or {}).items())]

    def build(tmp: Path) -> None:
        _run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={tmp}",
                "-DincludeScope=runtime",
                *overrides,
            ],
            pom.parent,
            f"fetching {name}'s jars from Maven",
        )

    return _cached(name, digest([pom], *overrides), build)


def maven_project(
    project: Path, name: str, *, run_tests: bool = False, inputs: Iterable[Path] = ()
) -> Path:
    """``mvn package`` of a project; a folder with its jar and its runtime dependencies.

    With ``run_tests`` the project's own tests run in the build (a failure is
    PeerUnavailable with their output); ``inputs`` are other files they read.
    """
    mvn = require("mvn", "Maven (apt-get install maven)")
    sources = [project / "pom.xml", *sorted((project / "src").rglob("*.java")), *inputs]

    def build(tmp: Path) -> None:
        args = [mvn, "-q", "-B", "package"] + ([] if run_tests else ["-DskipTests"])
        _run(args, project, f"building {name}")
        built = sorted((project / "target").glob("*.jar"))
        built = [jar for jar in built if not jar.name.endswith(("-sources.jar", "-tests.jar"))]
        if not built:
            raise PeerUnavailable(f"building {name} made no jar in {project / 'target'}")
        for jar in built:
            shutil.copy2(jar, tmp / jar.name)
        deps = project / "target" / "dependency"
        if deps.is_dir():
            for jar in deps.glob("*.jar"):
                shutil.copy2(jar, tmp / jar.name)

    return _cached(name, digest(sources), build)


def javac_jar(sources: list[Path], classpath: Path, name: str) -> Path:
    """Single Java sources compiled against the jars in ``classpath``, packed as one jar."""
    javac = require("javac", "a JDK (apt-get install openjdk-17-jdk-headless)")
    jar = require("jar", "a JDK (apt-get install openjdk-17-jdk-headless)")

    def build(tmp: Path) -> None:
        classes = tmp / "classes"
        classes.mkdir()
        _run(
            [javac, "-d", str(classes), "-cp", f"{classpath}/*", *map(str, sources)],
            ROOT,
            f"compiling {name}",
        )
        _run(
            [jar, "cf", str(tmp / f"{name}.jar"), "-C", str(classes), "."], ROOT, f"packing {name}"
        )
        shutil.rmtree(classes)

    return _cached(name, digest(sources, str(classpath)), build) / f"{name}.jar"


def go_binary(module: Path, name: str, *, tests: bool = False) -> Path:
    """``go build`` of a Go module (its ``go.mod`` and ``go.sum`` pin every dependency).

    ``tests``: ``go vet`` and ``go test`` it first (once per change of its sources).
    """
    go = require("go", "the Go toolchain")
    sources = [module / "go.mod", module / "go.sum", *sorted(module.glob("*.go"))]

    def build(tmp: Path) -> None:
        env = {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
        if tests:
            _run([go, "vet", "./..."], module, f"vetting {name}", env)
            _run([go, "test", "./..."], module, f"testing {name}", env)
        _run([go, "build", "-o", str(tmp / name), "."], module, f"building {name}", env)

    return _cached(name, digest(sources), build) / name
