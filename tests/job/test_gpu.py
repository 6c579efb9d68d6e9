"""GPU classes and the memory and throughput estimates (trainergym.job.gpu): the table and its
aliases, list prices, the calibration's interpolation and extrapolation, the floors, and where
`fits` draws the line."""

import pytest

from trainergym.job import gpu as G
from trainergym.job.gpu import GPU, GPUS, fits, gpu, list_price, peak_memory_gib, train_tokens_per_second

SMALL, LARGE = "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B"
OFFLOAD = 9.54 / 11.76  # the one offloaded measurement over its on-GPU twin


@pytest.fixture(autouse=True)
def reported_only(monkeypatch):
    """These tests pin the reported table, the fallback; the measured rows read before it have
    their own tests (test_gpu_measured.py)."""
    monkeypatch.setenv("TRAINERGYM_GPU_MEASURED", "off")


def test_the_table():
    assert {name: (g.memory_gib, g.usd_per_hour) for name, g in GPUS.items()} == {
        "NVIDIA RTX A5000": (24, 0.27), "NVIDIA GeForce RTX 4090": (24, 0.74), "NVIDIA A40": (48, 0.44),
        "NVIDIA RTX A6000": (48, 0.79), "NVIDIA A100 80GB PCIe": (80, 1.39), "NVIDIA H100 80GB HBM3": (80, 3.29)}
    for name, g in GPUS.items():
        assert g.name == name and 0 < g.speed_vs_h200 < 1  # every class is slower than the H200 calibrated on
    assert set(G.ALIASES.values()) <= set(GPUS)
    assert set(G.CALIBRATED_MODELS) == {SMALL, LARGE}


@pytest.mark.parametrize("alias, name", [("A5000", "NVIDIA RTX A5000"), ("RTX 4090", "NVIDIA GeForce RTX 4090"),
                                         ("4090", "NVIDIA GeForce RTX 4090"), ("A40", "NVIDIA A40"),
                                         ("A6000", "NVIDIA RTX A6000"), ("A100", "NVIDIA A100 80GB PCIe"),
                                         ("H100", "NVIDIA H100 80GB HBM3")])
def test_aliases_and_full_names_give_the_same_class(alias, name):
    assert gpu(alias) is GPUS[name] and gpu(name) is GPUS[name]


@pytest.mark.parametrize("name", ["a40", "H200", "NVIDIA A40 ", ""])
def test_an_unknown_class_is_a_key_error_listing_the_known_ones(name):
    with pytest.raises(KeyError, match="unknown GPU class") as err:
        gpu(name)
    assert "A5000, RTX 4090, 4090, A40, A6000, A100, H100" in str(err.value)


def test_list_price_per_gpu_hour_and_zero_when_unknown():
    assert list_price("A40") == 0.44 and list_price("NVIDIA A40") == 0.44
    assert list_price("H100") == 3.29
    assert list_price("NVIDIA B200") == 0.0 and list_price("") == 0.0


@pytest.mark.parametrize("model, seq_len, measured", [
    (SMALL, 2048, 7.58), (SMALL, 4096, 11.76), (SMALL, 8192, 20.13),
    (LARGE, 2048, 16.67), (LARGE, 4096, 18.3), (LARGE, 8192, 26.91),
])
def test_peak_at_a_calibration_point_is_the_measurement_offloaded(model, seq_len, measured):
    assert peak_memory_gib(model, seq_len) == pytest.approx(measured * OFFLOAD)
    assert peak_memory_gib(model, seq_len, lora=True) == pytest.approx(measured * OFFLOAD * 0.85)


def test_peak_is_linear_between_points_and_extrapolated_past_them():
    assert peak_memory_gib(SMALL, 3072) == pytest.approx((7.58 + 11.76) / 2 * OFFLOAD)
    assert peak_memory_gib(SMALL, 6144) == pytest.approx((11.76 + 20.13) / 2 * OFFLOAD)
    # past the last point: the last segment's slope goes on
    assert peak_memory_gib(SMALL, 12288) == pytest.approx((20.13 + (20.13 - 11.76)) * OFFLOAD)
    assert peak_memory_gib(LARGE, 16384) == pytest.approx((26.91 + 2 * (26.91 - 18.3)) * OFFLOAD)
    # below the first point: the first segment's slope goes back
    assert peak_memory_gib(SMALL, 1024) == pytest.approx((7.58 - (11.76 - 7.58) / 2) * OFFLOAD)


def test_peak_never_falls_below_half_the_shortest_measurement():
    floor = 0.5 * 7.58 * OFFLOAD
    assert peak_memory_gib(SMALL, 0) == pytest.approx(floor)  # the extrapolation would give 3.40 GiB
    assert peak_memory_gib(SMALL, 16) == pytest.approx(floor)
    assert peak_memory_gib(LARGE, 0) > 0.5 * 16.67 * OFFLOAD  # the 1.7B line stays above its floor


def test_peak_grows_with_seq_len_and_the_larger_model_needs_more():
    lengths = [0, 512, 1024, 2048, 3000, 4096, 6000, 8192, 16384, 32768]
    for model in (SMALL, LARGE):
        peaks = [peak_memory_gib(model, s) for s in lengths]
        assert peaks == sorted(peaks)
    assert all(peak_memory_gib(LARGE, s) > peak_memory_gib(SMALL, s) for s in lengths)


def test_an_uncalibrated_model_is_a_key_error():
    with pytest.raises(KeyError):
        peak_memory_gib("Qwen/Qwen3-4B", 4096)
    with pytest.raises(KeyError):
        fits("Qwen/Qwen3-4B", 4096, gpu("A40"))


def test_fits_keeps_five_percent_for_the_cuda_context():
    peak = peak_memory_gib(LARGE, 4096)
    exact = GPU("exact", peak / 0.95, 1.0, 1.0)
    assert fits(LARGE, 4096, exact)
    assert not fits(LARGE, 4096, GPU("short", peak / 0.95 - 1e-6, 1.0, 1.0))
    assert not fits(LARGE, 4096, GPU("no headroom", peak, 1.0, 1.0))  # enough for the peak, none for the context


def test_fits_on_the_real_classes():
    assert fits(LARGE, 16384, gpu("A40")) and not fits(LARGE, 16384, gpu("RTX 4090"))
    assert fits(SMALL, 8192, gpu("A5000")) and fits(LARGE, 8192, gpu("A5000"))
    # 1.7B on a 24 GiB card: the line falls between 8,700 and 8,800 tokens
    assert fits(LARGE, 8700, gpu("4090")) and not fits(LARGE, 8800, gpu("4090"))
    # LoRA's smaller peak moves it
    assert fits(LARGE, 8800, gpu("4090"), lora=True) and not fits(LARGE, 12288, gpu("4090"), lora=True)


def test_throughput_scales_with_the_class_and_has_a_floor():
    h100 = gpu("H100")
    assert train_tokens_per_second(SMALL, 4096, h100) == pytest.approx(17977 * 0.7)
    assert train_tokens_per_second(LARGE, 3072, h100) == pytest.approx((5614 + 13096) / 2 * 0.7)
    assert train_tokens_per_second(SMALL, 4096, gpu("A40")) == pytest.approx(17977 * 0.2)
    # short sequences extrapolate below 1,000 tokens/s on an H200; that is the floor
    assert train_tokens_per_second(SMALL, 0, h100) == pytest.approx(1000 * 0.7)
    assert train_tokens_per_second(SMALL, 16384, h100) > train_tokens_per_second(SMALL, 8192, h100)
