"""The measured GPU rows (`trainergym gpu-bench`, trainergym.job.gpu_bench / gpu_measured) and how
trainergym.job.gpu reads them before its reported table: the shipped H200 rows, the sources each
estimate names, the fallbacks, and the benchmark's code path on CPU (a tiny shape, offline)."""

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainergym.job import gpu as G
from trainergym.job import gpu_bench, gpu_measured
from trainergym.job.bundle import PrimeRL
from trainergym.job.gpu_measured import MeasuredFile, MeasuredRow, MeasuredTable

SMALL, LARGE, FOUR = "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B"
MINI = "the GPU benchmark needs the mini extra: uv sync --extra mini"
SCRIPT = Path(gpu_bench.__file__)


@pytest.fixture
def shipped(monkeypatch):
    monkeypatch.delenv(gpu_measured.MEASURED_ENV, raising=False)
    return gpu_measured.load()


def use(monkeypatch, tmp_path, *tables: MeasuredTable) -> None:
    path = tmp_path / "rows.json"
    gpu_measured.write(path, MeasuredFile(tables=list(tables)))
    monkeypatch.setenv(gpu_measured.MEASURED_ENV, str(path))


def table(gpu="NVIDIA H200", rows=()) -> MeasuredTable:
    return MeasuredTable(gpu=gpu, gpu_memory_gib=139.8, torch="2.11.0", transformers="5.17.0", date="2026-12-01T17:00:00",
                         command="test", rows=list(rows))


def ok(model, seq_len, peak, tok_s, offload=True, ckpt=True) -> MeasuredRow:
    return MeasuredRow(model=model, seq_len=seq_len, grad_ckpt=ckpt, optimizer_offload=offload, status="ok",
                       peak_gib=peak, step_s=seq_len / tok_s, train_tok_s=tok_s)


def test_the_rungs_are_the_powers_of_two_the_job_schema_allows():
    bounds = {type(m).__name__: m for m in PrimeRL.model_fields["seq_len"].metadata}
    lo, hi = bounds["Ge"].ge, bounds["Le"].le
    assert gpu_bench.SEQ_LEN_RUNGS == tuple(2 ** k for k in range(20) if lo <= 2 ** k <= hi)


def test_the_shipped_rows_are_a_full_h200_matrix_with_provenance(shipped):
    assert len(shipped.tables) == 1
    t = shipped.tables[0]
    assert t.source == "measured" and "H200" in t.gpu and t.torch and t.transformers and t.date.startswith("2026-")
    assert t.command.startswith("python3 src/trainergym/job/gpu_bench.py") and "max_memory_allocated" in t.method
    for model in (SMALL, LARGE, FOUR):
        for ckpt, offload in gpu_bench.VARIANTS:
            series = t.series(model, ckpt, offload)
            assert [r.seq_len for r in series] == list(gpu_bench.SEQ_LEN_RUNGS), (model, ckpt, offload)
            assert all(r.status in ("ok", "oom") for r in series)
            assert all(r.peak_gib and r.step_s and r.train_tok_s for r in series if r.status == "ok")
            peaks = [r.peak_gib for r in series if r.status == "ok"]
            assert all(b >= a - 0.1 for a, b in zip(peaks, peaks[1:]))  # grows with seq_len (to 0.1 GiB)
            assert series[-1].status == "oom" or series[0].status == "ok"  # OOM only from some rung on
    # prime-rl's default (checkpointing on, optimizer offloaded) needs the least at every rung
    for model in (SMALL, LARGE, FOUR):
        for n in gpu_bench.SEQ_LEN_RUNGS:
            default, on_gpu, no_ckpt = (t.row(model, n, c, o) for c, o in gpu_bench.VARIANTS)
            assert default.status == "ok" and default.peak_gib < on_gpu.peak_gib
            assert no_ckpt.status == "oom" or no_ckpt.peak_gib >= on_gpu.peak_gib - 0.1


def test_gpu_reads_the_measured_rows_first_and_says_so(shipped):
    t = shipped.tables[0]
    e = G.peak_estimate(SMALL, 4096)
    assert e.source == "measured" and e.value == t.row(SMALL, 4096, True, True).peak_gib
    assert e.basis.startswith(f"measured on {t.gpu}") and "optimizer offloaded" in e.basis
    assert G.peak_memory_gib(SMALL, 4096) == e.value
    lora = G.peak_estimate(SMALL, 4096, lora=True)
    assert lora.value == pytest.approx(e.value * G.LORA_FACTOR) and "LoRA" in lora.basis
    # between rungs: linear
    assert G.peak_memory_gib(LARGE, 6144) == pytest.approx((t.row(LARGE, 4096, True, True).peak_gib
                                                            + t.row(LARGE, 8192, True, True).peak_gib) / 2)
    # throughput: checkpointing on with AdamW on the GPU, scaled by the class's speed
    s = G.speed_estimate(SMALL, 4096, G.gpu("A40"))
    assert s.source == "measured" and s.value == pytest.approx(t.row(SMALL, 4096, True, False).train_tok_s * 0.2)
    assert "x0.2 for NVIDIA A40" in s.basis
    # a model only the measured rows have is covered; one neither has is a KeyError
    assert G.covered(FOUR) and G.peak_estimate(FOUR, 4096).source == "measured" and not G.covered("Qwen/Qwen3-8B")
    with pytest.raises(KeyError):
        G.peak_memory_gib("Qwen/Qwen3-8B", 4096)


def test_off_gives_the_reported_table(monkeypatch):
    monkeypatch.setenv(gpu_measured.MEASURED_ENV, "off")
    e = G.peak_estimate(SMALL, 4096)
    assert e.source == "reported" and e.value == pytest.approx(11.76 * G.OPTIMIZER_OFFLOAD_FACTOR)
    assert e.basis.startswith("reported")
    assert G.speed_estimate(SMALL, 4096, G.gpu("A40")).source == "reported" and not G.covered(FOUR)


def test_models_the_rows_lack_fall_back_to_reported(monkeypatch, tmp_path):
    use(monkeypatch, tmp_path, table(rows=[ok(FOUR, 1024, 17.0, 1200), ok(FOUR, 2048, 18.0, 2300)]))
    assert G.peak_estimate(SMALL, 4096).source == "reported" and G.peak_estimate(FOUR, 1536).value == pytest.approx(17.5)
    assert G.speed_estimate(LARGE, 4096, G.gpu("A40")).source == "reported"


def test_without_offloaded_rows_the_on_gpu_rows_are_offloaded_by_the_factor(monkeypatch, tmp_path):
    use(monkeypatch, tmp_path, table(rows=[ok(SMALL, 2048, 7.0, 10000, offload=False),
                                           ok(SMALL, 4096, 10.6, 23000, offload=False)]))
    e = G.peak_estimate(SMALL, 4096)
    assert e.source == "measured" and e.value == pytest.approx(10.6 * G.OPTIMIZER_OFFLOAD_FACTOR) and "x0.81" in e.basis


def test_a_rung_that_ran_out_of_memory_does_not_fit_what_measured_it(monkeypatch, tmp_path):
    oom = MeasuredRow(model=SMALL, seq_len=8192, grad_ckpt=True, optimizer_offload=True, status="oom")
    use(monkeypatch, tmp_path, table(rows=[ok(SMALL, 2048, 4.0, 9000), ok(SMALL, 4096, 8.0, 16000), oom]))
    assert G.fits(SMALL, 4096, G.gpu("A40")) and G.peak_memory_gib(SMALL, 8192) >= 139.8
    assert not G.fits(SMALL, 8192, G.gpu("H100")) and G.classes_that_fit(SMALL, 8192) == []
    assert G.peak_memory_gib(SMALL, 256) == 4.0  # flat below the shortest rung


def test_throughput_of_a_gpu_of_unknown_speed_is_not_used(monkeypatch, tmp_path):
    use(monkeypatch, tmp_path, table(gpu="NVIDIA B999", rows=[ok(SMALL, 2048, 4.0, 9000, offload=False),
                                                              ok(SMALL, 4096, 8.0, 16000, offload=False)]))
    assert G.speed_estimate(SMALL, 4096, G.gpu("A40")).source == "reported"
    assert G.peak_estimate(SMALL, 4096).source == "measured"  # memory does not depend on the card's speed


def test_a_new_table_replaces_the_same_devices_and_keeps_others():
    f = MeasuredFile(tables=[table("NVIDIA H200"), table("NVIDIA A40")])
    merged = f.merged(table("NVIDIA H200", [ok(SMALL, 256, 3.0, 900)]))
    assert [t.gpu for t in merged.tables] == ["NVIDIA A40", "NVIDIA H200"] and merged.tables[1].rows


def test_the_script_runs_with_its_folder_alone_and_says_no_gpu_in_one_line(tmp_path):
    pytest.importorskip("torch", reason=MINI)
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU: the no-GPU answer cannot be seen here")
    # as on a bare GPU machine: the script's folder importable, nothing of trainergym imported
    run = ("import runpy, sys\n"
           f"sys.argv = [{str(SCRIPT)!r}, '--out', {str(tmp_path / 'x.json')!r}]\n"
           f"sys.path.insert(0, {str(SCRIPT.parent)!r})\n"
           "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
           "finally:\n    assert not [m for m in sys.modules if m.startswith('trainergym')], 'imported trainergym'\n")
    out = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0 and "no CUDA GPU" in out.stderr
    assert not (tmp_path / "x.json").exists()


def test_the_cli_measures_a_tiny_shape_on_cpu(tmp_path):
    pytest.importorskip("torch", reason=MINI)
    pytest.importorskip("transformers", reason=MINI)
    from trainergym.cli import app

    out = tmp_path / "rows.json"
    gpu_measured.write(out, MeasuredFile(tables=[table("NVIDIA H200", [ok(SMALL, 256, 3.0, 900)])]))
    result = CliRunner().invoke(app, ["gpu-bench", "--device", "cpu", "--models", "tiny", "--seq-lens", "32",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "3 of 3 rows measured on cpu" in result.output
    f = gpu_measured.read(out)
    assert [t.gpu for t in f.tables] == ["NVIDIA H200", "cpu"]  # merged beside the other device's table
    t = f.tables[1]
    assert t.command == f"trainergym gpu-bench --device cpu --models tiny --seq-lens 32 --out {out}"
    assert {(r.seq_len, r.grad_ckpt, r.optimizer_offload) for r in t.rows} == {(32, c, o) for c, o in gpu_bench.VARIANTS}
    assert all(r.status == "ok" and r.peak_gib is None and r.step_s > 0 and r.train_tok_s > 0 for r in t.rows)


def test_the_cli_without_a_gpu_is_one_line_and_exit_2(tmp_path):
    from trainergym.cli import app

    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this host has a GPU")
    except ImportError:
        pass  # without torch it says so, the same way
    result = CliRunner().invoke(app, ["gpu-bench", "--out", str(tmp_path / "x.json")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("error: gpu-bench") and result.output.strip().count("\n") == 0
    assert not (tmp_path / "x.json").exists()


def test_the_shapes_are_qwen3s(monkeypatch):
    torch = pytest.importorskip("torch", reason=MINI)
    pytest.importorskip("transformers", reason=MINI)
    from transformers import Qwen3Config, Qwen3ForCausalLM

    sizes = {}
    for model in (SMALL, LARGE, FOUR):
        with torch.device("meta"):
            net = Qwen3ForCausalLM(Qwen3Config(**gpu_bench.SHAPES[model]))
        sizes[model] = round(sum(p.numel() for p in net.parameters()) / 1e9, 2)
        assert net.lm_head.weight is net.model.embed_tokens.weight  # tied, as all three are
    assert sizes == {SMALL: 0.6, LARGE: 1.72, FOUR: 4.02}  # the model cards' 0.6B, 1.7B and 4.0B
