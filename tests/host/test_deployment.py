"""The GPU split (trainergym.host.deployment): what a host counts and how prime-rl's deployment
divides it. The runner's use of it: tests/host/test_runner.py."""

import pytest

from tests.fakes.gpu_host import fake_nvidia_smi
from trainergym.host.deployment import detect_gpus, split, visible_gpus


@pytest.mark.parametrize("listed, count", [("0,1", 2), ("GPU-a1, GPU-b2 ,GPU-c3", 3), ("", 0), ("-1", 0), ("3", 1)])
def test_cuda_visible_devices_decides_when_set(listed, count):
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": listed}) == count


def test_nvidia_smi_counts_and_names_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert visible_gpus({}) is None and detect_gpus({}) == ("none", None)  # nothing here can tell
    fake_nvidia_smi(tmp_path, names=("NVIDIA A40", "NVIDIA RTX A6000"))
    assert visible_gpus({}) == 2 and detect_gpus({}) == ("NVIDIA A40", 2)
    # CUDA_VISIBLE_DEVICES decides which: the name is the first of those it names
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "1"}) == ("NVIDIA RTX A6000", 1)
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "GPU-x,GPU-y"}) == ("NVIDIA A40", 2)
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == ("none", 0)
    fake_nvidia_smi(tmp_path, status=9)  # the driver is gone
    assert visible_gpus({}) == 0 and detect_gpus({}) == ("none", 0)


def test_the_split_serves_with_half_and_trains_with_the_rest():
    assert split(2) == {"num_train_gpus": 1, "num_infer_gpus": 1}
    assert split(5) == {"num_train_gpus": 3, "num_infer_gpus": 2}
    assert split(8) == {"num_train_gpus": 4, "num_infer_gpus": 4}
    with pytest.raises(ValueError, match="at least 2"):
        split(1)
