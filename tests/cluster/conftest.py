"""Real engines for the launcher tests: a single-node SLURM (scripts/slurm_local.sh) and a Ray head, both on
127.0.0.1, started by the tests and stopped when they end, also when they fail; and a tiny world and model
(nothing downloaded) whose 2-cell grid runs real `lfo train` cells in seconds."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "train"))
sys.path.insert(0, str(Path(__file__).parent))
from cluster_helpers import STEPS, free_port, lfo, wait_for, write_grid  # noqa: E402
from tiny import tiny_world_and_model  # noqa: E402


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_world_and_model(tmp_path_factory.mktemp("cluster_tiny"))


@pytest.fixture(scope="module")
def local_runs(tiny):
    """The reference: the 4-step grid on the local launcher (the metrics every engine must reproduce)."""
    grid = write_grid(tiny, "ref", steps=STEPS)
    runs = tiny / "local"
    lfo("ablate", "--grid", str(grid), "--runs-dir", str(runs), "--parallel", "2")
    return runs


@pytest.fixture(scope="module")
def slurm():
    """A single-node SLURM started by scripts/slurm_local.sh in its own folder and ports; its SLURM_CONF."""
    if os.geteuid() != 0 or not (shutil.which("slurmctld") and shutil.which("slurmd") and shutil.which("munged")):
        pytest.skip("SLURM tests skipped: they need root and Debian's slurm-wlm and munge (.ci/run installs them)")
    folder = Path(tempfile.mkdtemp(prefix="lfo-slurm-"))  # short: munge's socket path must fit in 108 bytes
    env = {**os.environ, "LFO_SLURM_DIR": str(folder), "LFO_SLURM_PORT": str(free_port(2)), "LFO_SLURM_CPUS": "2"}
    script = REPO / "scripts" / "slurm_local.sh"
    try:
        started = subprocess.run(["bash", str(script), "start"], env=env, capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr
        yield {"SLURM_CONF": str(folder / "slurm.conf")}
    finally:
        subprocess.run(["bash", str(script), "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_head():
    """A Ray head as its own process (`ray start --head --block`), 2 CPUs, no dashboard, in a network namespace
    of its own (only the loopback exists there: Ray binds some of its servers to every interface); the driver
    runs in the same namespace (``prefix``)."""
    ray_bin = Path(sys.executable).parent / "ray"
    if not ray_bin.exists():
        pytest.skip("Ray tests skipped: ray is not installed (pip install -e '.[dev]')")
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("Ray tests skipped: they need root and iproute2 for a network namespace of their own")
    ns = f"lfo-ray-{os.getpid()}"
    # Ray's token authentication, with a token of the test's own: the head and every driver carry it
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run(["ip", "netns", "add", ns], check=True)
    prefix = ["ip", "netns", "exec", ns]
    temp = Path(tempfile.mkdtemp(prefix="lfo-ray-"))
    proc = None
    try:
        subprocess.run([*prefix, "ip", "link", "set", "lo", "up"], check=True)
        port = 6379
        proc = subprocess.Popen(
            [*prefix, str(ray_bin), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
             "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false", "--disable-usage-stats",
             f"--temp-dir={temp}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env={**os.environ, **auth})
        address = f"127.0.0.1:{port}"
        wait_for(lambda: subprocess.run([*prefix, str(ray_bin), "status", f"--address={address}"], capture_output=True,
                                        timeout=60, env={**os.environ, **auth}).returncode == 0,
                 timeout=120, every=1, what="the Ray head")
        yield {"address": address, "prefix": prefix, "proc": proc, "env": auth}
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)
