"""The GPU split (trainergym.host.deployment): what a host counts and how prime-rl's deployment
divides it. The runner's use of it: tests/host/test_runner.py."""

import pytest

from trainergym.host.deployment import split, visible_gpus


@pytest.mark.parametrize("listed, count", [("0,1", 2), ("GPU-a1, GPU-b2 ,GPU-c3", 3), ("", 0), ("-1", 0), ("3", 1)])
def test_cuda_visible_devices_decides_when_set(listed, count):
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": listed}) == count


def test_nvidia_smi_counts_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert visible_gpus({}) is None  # nothing here can tell
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA A40 (UUID: GPU-1)'\necho 'GPU 1: NVIDIA A40 (UUID: GPU-2)'\n")
    smi.chmod(0o755)
    assert visible_gpus({}) == 2
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed'\nexit 9\n")
    assert visible_gpus({}) == 0


def test_the_split_serves_with_half_and_trains_with_the_rest():
    assert split(2) == {"num_train_gpus": 1, "num_infer_gpus": 1}
    assert split(5) == {"num_train_gpus": 3, "num_infer_gpus": 2}
    assert split(8) == {"num_train_gpus": 4, "num_infer_gpus": 4}
    with pytest.raises(ValueError, match="at least 2"):
        split(1)
