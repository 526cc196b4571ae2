"""The Docker engine and the host packages kchaos needs, made present idempotently."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors

from clusters.errors import ClusterError

# chromium: headless, for the test that opens report.html as a person would
# (tests/unit/checkers/test_report_browser.py); g++ and libfuse3-dev build the disk layer
# (clusters/disk_layer.py BUILD_PACKAGES).
HOST_PACKAGES = (
    "docker.io", "iptables", "debootstrap", "maven", "openjdk-17-jre-headless", "tar", "chromium",
    "g++", "libfuse3-dev",
)  # fmt: skip
DOCKERD_LOG = Path("/var/log/kchaos-dockerd.log")
ENGINE_START_TIMEOUT_S = 60.0


def missing_packages(packages: tuple[str, ...] = HOST_PACKAGES) -> list[str]:
    if shutil.which("dpkg-query") is None:
        return []  # Not Debian: the user installs the equivalents by hand (README says which).
    missing = []
    for pkg in packages:
        result = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True
        )
        if "install ok installed" not in result.stdout:
            missing.append(pkg)
    return missing


def ensure_packages(say: Callable[[str], None] = print) -> None:
    missing = missing_packages()
    if not missing:
        return
    if os.geteuid() != 0:
        raise ClusterError(
            f"missing Debian packages {', '.join(missing)}: run "
            f"'sudo apt-get install -y {' '.join(missing)}' or run setup as root"
        )
    say(f"installing Debian packages: {', '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *missing]):
        result = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            tail = "\n".join(result.stderr.strip().splitlines()[-5:])
            raise ClusterError(f"'{' '.join(cmd)}' failed:\n{tail}")


def client(timeout: int = 120) -> docker.DockerClient:
    """A client for a running engine, or one clear error saying how to get one."""
    try:
        c = docker.from_env(timeout=timeout)
        c.ping()
        return c
    except docker.errors.DockerException as exc:
        raise ClusterError(
            "Docker is not running (no engine answers on the Docker socket): run the README's "
            f"setup command, which starts dockerd ({_short(exc)})"
        ) from None


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


def engine_answers() -> bool:
    try:
        docker.from_env(timeout=5).ping()
        return True
    except docker.errors.DockerException:
        return False


def ensure_engine(say: Callable[[str], None] = print) -> docker.DockerClient:
    """Starts dockerd when no engine answers, then proves the engine can run a container."""
    if not engine_answers():
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise ClusterError("dockerd is not installed: install Debian's docker.io package")
        if os.geteuid() != 0:
            raise ClusterError("Docker is not running and only root can start dockerd")
        say(f"starting dockerd (log: {DOCKERD_LOG})")
        log = DOCKERD_LOG.open("ab")
        # A session of its own, so that dockerd outlives this command and its terminal.
        subprocess.Popen(
            [dockerd],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + ENGINE_START_TIMEOUT_S
        while not engine_answers():
            if time.monotonic() > deadline:
                tail = "\n".join(DOCKERD_LOG.read_text(errors="replace").splitlines()[-8:])
                raise ClusterError(
                    f"dockerd did not start within {ENGINE_START_TIMEOUT_S:.0f} s:\n{tail}"
                )
            time.sleep(0.2)
    return client()


def prove_engine(c: docker.DockerClient, image: str) -> None:
    """Runs a throwaway container: an engine that answers pings may still be unable to run one."""
    try:
        out = c.containers.run(
            image, ["/bin/true"], remove=True, network_mode="none", labels={"kchaos": "1"}
        )
    except docker.errors.DockerException as exc:
        raise ClusterError(
            f"the Docker engine answers but cannot run a container: {_short(exc)}"
        ) from None
    del out
