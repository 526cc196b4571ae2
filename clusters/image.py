"""The node base image, built locally because no container registry is reachable.

A Debian rootfs from debootstrap, imported with ``docker import``. The tag carries a hash of the
recipe, so the image is rebuilt exactly when the recipe changes. Kafka itself is mounted, never
baked in: switching Kafka versions never rebuilds the image.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors

from clusters.cache import cache_dir
from clusters.errors import ClusterError

# Overridable so a benchmark can time a cold build without removing the image clusters use.
IMAGE_REPO = os.environ.get("KCHAOS_IMAGE_REPO", "kchaos-node")
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = (
    "openjdk-17-jre-headless",
    "iptables",
    "iproute2",
    "libfaketime",
    "procps",
    "ca-certificates",
    "netcat-openbsd",
)
# Docker import applies these to the image config (the rootfs has none of its own).
IMAGE_CHANGES = ("ENV LANG=C.UTF-8", "LABEL kchaos=1")


def recipe() -> dict:
    return {
        "suite": SUITE,
        "variant": "minbase",
        "packages": list(PACKAGES),
        "changes": list(IMAGE_CHANGES),
        "format": 1,
    }


def image_tag() -> str:
    digest = hashlib.sha256(json.dumps(recipe(), sort_keys=True).encode()).hexdigest()[:12]
    return f"{IMAGE_REPO}:{digest}"


def image_exists(client: docker.DockerClient, tag: str | None = None) -> bool:
    try:
        client.images.get(tag or image_tag())
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_image(client: docker.DockerClient, say: Callable[[str], None] = print) -> str:
    """Builds the base image unless an image for the current recipe exists; returns its tag."""
    tag = image_tag()
    if image_exists(client, tag):
        return tag
    if shutil.which("debootstrap") is None:
        raise ClusterError("debootstrap is not installed: run the setup command from the README")
    work = cache_dir() / "image-build"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        rootfs = Path(tmp) / "rootfs"
        say(f"building node image {tag} with debootstrap ({SUITE}, about a minute)")
        result = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(rootfs),
                MIRROR,
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
            raise ClusterError(f"debootstrap failed building the node image:\n{tail}")
        # apt lists and caches are dead weight in every node.
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        tarball = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        say(f"importing node image {tag}")
        changes = [arg for change in IMAGE_CHANGES for arg in ("--change", change)]
        imported = subprocess.run(
            ["docker", "import", *changes, str(tarball), tag], capture_output=True, text=True
        )
        if imported.returncode != 0:
            raise ClusterError(f"docker import of the node image failed: {imported.stderr.strip()}")
    return tag
