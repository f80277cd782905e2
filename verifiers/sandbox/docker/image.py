"""Build the ``docker`` sandbox image offline: a Debian minbase rootfs with python3, imported.

The image holds python3 and the engines of the trial-deployed config kinds (nginx, HAProxy,
and promtool from the ``prometheus`` package). ``build_image`` runs ``debootstrap
--variant=minbase`` against the Debian mirror apt already uses (or one given), so it needs
root, ``debootstrap`` and a reachable Debian mirror but no image registry; the rootfs is
streamed into ``docker import``. Users who can pull an image simply set
``TASKSIEVE_SANDBOX_IMAGE`` (it needs ``python3`` on the PATH, and the engines for those config
kinds; the sandbox's server is passed to it as ``python3 -c`` source, nothing is baked in). It
does NOT verify package signatures beyond what debootstrap itself checks, and the image is not
reproducible bit for bit (package versions follow the mirror).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_IMAGE = "tasksieve-sandbox:latest"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
IMAGE_ENV = "TASKSIEVE_SANDBOX_IMAGE"
PACKAGES = ("python3", "nginx", "haproxy", "prometheus")  # engines: trial-deployed configs
_CHANGES = [
    "USER 65534:65534",
    "WORKDIR /scratch",
    "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8",
    'CMD ["sleep", "infinity"]',
]
_PRUNE = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man")


class ImageBuildError(Exception):
    """The sandbox image could not be built; the message says what to fix."""


def image_name(image: str | None = None) -> str:
    """The image to use: the argument, else ``$TASKSIEVE_SANDBOX_IMAGE``, else the default."""
    return image or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE


def apt_mirror(suite: str = "bookworm", root: str = "/etc/apt") -> str:
    """The Debian mirror apt uses for ``suite`` (one-line or deb822 sources), else the default."""
    texts: list[str] = []
    for path in [Path(root, "sources.list"), *sorted(Path(root, "sources.list.d").glob("*"))]:
        if path.suffix in (".list", ".sources") and path.is_file():
            texts.append(path.read_text(errors="replace"))
    for text in texts:
        for line in text.splitlines():  # one-line style: deb [opts] URI SUITE COMPONENTS
            m = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m and m.group(2) == suite and "security" not in m.group(1):
                return m.group(1)
        for stanza in re.split(r"\n\s*\n", text):  # deb822 style
            fields = dict(re.findall(r"(?m)^(\w[\w-]*):\s*(.*)$", stanza))
            uris, suites = fields.get("URIs", "").split(), fields.get("Suites", "").split()
            if uris and suite in suites and "security" not in uris[0]:
                return uris[0]
    return DEFAULT_MIRROR


def _client() -> Any:
    try:
        import docker
    except ImportError as e:
        raise ImageBuildError("the docker SDK is missing: pip install 'tasksieve[docker]'") from e
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:
        raise ImageBuildError(f"no Docker engine reachable ({e}); start dockerd") from e
    return client


def image_exists(client: Any, name: str) -> bool:
    """Whether the engine behind ``client`` has an image called ``name``."""
    import docker

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_image(
    name: str | None = None,
    mirror: str | None = None,
    force: bool = False,
    suite: str = "bookworm",
    workdir: str | None = None,
) -> bool:
    """Build ``name`` with debootstrap + docker import; False when it already existed (skipped)."""
    name = image_name(name)
    client = _client()
    if not force and image_exists(client, name):
        return False
    if os.geteuid() != 0:
        raise ImageBuildError("building the image needs root (debootstrap); run it with sudo")
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageBuildError("debootstrap is missing: apt-get install -y debootstrap")
    mirror = mirror or apt_mirror(suite)
    tmp = tempfile.mkdtemp(prefix="tasksieve-rootfs-", dir=workdir)
    rootfs = os.path.join(tmp, "rootfs")
    try:
        cmd = [debootstrap, "--variant=minbase", f"--include={','.join(PACKAGES)}", suite]
        done = subprocess.run([*cmd, rootfs, mirror], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ImageBuildError(f"debootstrap from {mirror} failed: {' | '.join(tail)}")
        for rel in _PRUNE:
            shutil.rmtree(os.path.join(rootfs, rel), ignore_errors=True)
        scratch = os.path.join(rootfs, "scratch")  # the tmpfs mounted here copies this mode
        os.makedirs(scratch, exist_ok=True)
        os.chmod(scratch, 0o1777)
        _import(client, rootfs, name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


def _import(client: Any, rootfs: str, name: str) -> None:
    """Stream ``tar -C rootfs -c .`` into the engine as image ``name``."""
    repo, _, tag = name.rpartition(":") if ":" in name.split("/")[-1] else (name, "", "latest")
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", rootfs, "-c", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert tar.stdout is not None
    try:
        client.api.import_image(
            src=tar.stdout, repository=repo, tag=tag, changes=_CHANGES, stream_src=True
        )
    except Exception as e:
        tar.kill()
        raise ImageBuildError(f"docker import of {name} failed: {e}") from e
    finally:
        _, err = tar.communicate()
    if tar.returncode != 0:
        raise ImageBuildError(f"tar of the rootfs failed: {err.decode(errors='replace')[-300:]}")
