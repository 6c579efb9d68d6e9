import asyncio

import pytest

from tests.fakes.jobs import write_job

from trainergym.backends.mock import MockBackend, simulate
from trainergym.job.gpu import fits, gpu, peak_memory_gib
from trainergym.job.bundle import build_bundle, parse_job

GOOD = {"n_tasks": 2000, "distinct_prompts": 2000, "distinct_verified_prompts": 2000, "reward_separation": 1.0,
        "noop_ok": True, "reward_exploits": 0, "leakage": False, "verified_share": 1.0, "skill_coverage": 1.0,
        "tool_parity": 1.0, "reward_margin": 1.0, "shape_coverage": 1.0, "mistake_coverage": 1.0}


@pytest.fixture
def bundle_for(tmp_path, task, reference_files):
    def make(probe=GOOD, **prime_rl):
        text = reference_files["job.toml"]
        job, _ = parse_job(text)
        job = job.model_copy(update={"prime_rl": job.prime_rl.model_copy(update=prime_rl)})
        write_job(tmp_path / "ws", reference_files)
        b = build_bundle(tmp_path / "ws", tmp_path / f"b{len(list(tmp_path.iterdir()))}", job, task)
        b.manifest.probe = dict(probe)
        return b
    return make


def test_deterministic_given_seed_and_labelled_surrogate(bundle_for, task):
    b = bundle_for()
    r1, r2 = simulate(b, task, 1, gpu("A40")), simulate(b, task, 1, gpu("A40"))
    assert r1.post == r2.post and r1.source == "surrogate" and r1.status == "succeeded"
    assert len({simulate(b, task, s, gpu("A40")).post for s in range(8)}) > 1  # seeded noise
    assert r1.post * r1.eval_n == pytest.approx(round(r1.post * r1.eval_n))  # k/n


def mean_post(b, task, model_seeds=range(10)):
    return sum(simulate(b, task, s, gpu("A40")).post for s in model_seeds) / len(model_seeds)


def test_outcome_depends_on_what_the_job_contains(bundle_for, task):
    good = mean_post(bundle_for(), task)
    pays_for_nothing = mean_post(bundle_for({**GOOD, "reward_separation": 0.0}), task)
    no_tools = mean_post(bundle_for({**GOOD, "tool_parity": 0.0}), task)
    narrow = mean_post(bundle_for({**GOOD, "skill_coverage": 0.1}), task)
    junk = mean_post(bundle_for({**GOOD, "verified_share": 0.0}), task)
    half_wrong = mean_post(bundle_for({**GOOD, "verified_share": 0.5}), task)
    exploited = mean_post(bundle_for({**GOOD, "reward_exploits": 3}), task)
    unprobed = mean_post(bundle_for({}), task)  # a bundle that skipped the probe measured nothing
    bad_lr = mean_post(bundle_for(lr=1e-4), task)
    tiny = mean_post(bundle_for(max_steps=2, scheduler="constant"), task)
    pre = 0.742
    assert good > pre + 0.05
    assert pays_for_nothing < pre  # rewards that pay for nothing make the model worse
    assert no_tools < good and narrow < good and tiny < good and bad_lr < good
    assert bad_lr < pre
    assert junk < pre and exploited < pre and unprobed < pre  # junk data, backdoors: no gain, some harm
    assert pre < half_wrong < good


def test_weaker_model_and_short_turns_learn_less(bundle_for, task, reference_files):
    small = bundle_for()
    small.job = small.job.model_copy(update={"job": small.job.job.model_copy(update={"base_model": "Qwen/Qwen3-0.6B"})})
    assert simulate(small, task, 0, gpu("A40")).pre < simulate(bundle_for(), task, 0, gpu("A40")).pre
    assert mean_post(bundle_for(max_turns=2), task) < mean_post(bundle_for(), task)


def test_out_of_memory_crashes_and_budget_caps_steps(bundle_for, task, monkeypatch):
    monkeypatch.setenv("TRAINERGYM_GPU_MEASURED", "off")  # the reported table (test_gpu_measured.py: the rows)
    # calibration: 1.7B at 8192 peaks at 26.9 GiB with AdamW on the GPU, 0.81x that offloaded
    assert peak_memory_gib("Qwen/Qwen3-1.7B", 8192) == pytest.approx(26.91 * 9.54 / 11.76)
    assert not fits("Qwen/Qwen3-1.7B", 16384, gpu("RTX 4090")) and fits("Qwen/Qwen3-1.7B", 16384, gpu("A40"))
    assert fits("Qwen/Qwen3-0.6B", 8192, gpu("RTX 4090"))
    r = simulate(bundle_for(seq_len=16384), task, 0, gpu("RTX 4090"))
    assert r.status == "failed" and r.failure_reason == "out of memory" and r.post is None
    long = simulate(bundle_for(max_steps=300), task, 0, gpu("A40"))
    assert long.steps_done < 300 and long.train_seconds <= task.bounds.gpu_hours * 3600 / task.bounds.gpu_count


def test_protocol_submit_result_cancel_and_reuse(bundle_for, task):
    async def go():
        backend = MockBackend(seed=3, latency=0.05)
        b = bundle_for()
        h = await backend.submit(b, task)
        r = await backend.result(h)
        h2 = await backend.submit(b, task)  # byte-identical: reused
        assert (await backend.result(h2)).post == r.post
        with pytest.raises(TimeoutError):
            await backend.result(h, timeout=0.001)
        slow = MockBackend(latency=1)
        h3 = await slow.submit(b, task)
        await slow.cancel(h3)
        await slow.cancel(h3)  # idempotent
        assert (await slow.result(h3)).status == "cancelled"
    asyncio.run(go())


def test_no_byte_lottery_noise_is_drawn_per_episode(tmp_path, reference_files):
    """Comment- and whitespace-only variants of a job earn the same expected post and, for the
    same episode seed, the same reward; different episode seeds see an n=200 eval's spread."""
    import asyncio

    from trainergym import AsyncTrainerEnv

    chains = reference_files["taskset/chains.py"]
    variants = [reference_files, {**reference_files, "taskset/chains.py": chains + "\n# tuned by hand\n"},
                {**reference_files, "taskset/chains.py": chains.replace("\n\n\n", "\n\n\n\n")}]

    async def episode(files, seed, reward_noise=True):
        env = AsyncTrainerEnv(runs_dir=tmp_path / "runs", reward_noise=reward_noise)
        try:
            await env.reset(seed=seed, options={"family": "calc_chain"})
            for path, content in files.items():
                await env.step({"name": "write_file", "arguments": {"path": path, "content": content}})
            _, reward, _, _, info = await env.step({"name": "submit_job", "arguments": {}})
            return reward, info["result"]
        finally:
            env.close()

    outcomes = [asyncio.run(episode(files, seed=3)) for files in variants]
    assert len({r["content_hash"] for _, r in outcomes}) == 3
    assert len({r["details"]["post_expected"] for _, r in outcomes}) == 1
    assert len({reward for reward, _ in outcomes}) == 1
    other = asyncio.run(episode(variants[1], seed=4))
    assert other[1]["details"]["post_expected"] == outcomes[0][1]["details"]["post_expected"]
    # reward_noise off: every variant and every seed earns the expected post's reward
    quiet = {asyncio.run(episode(files, seed=seed, reward_noise=False))[0] for files in variants[:2] for seed in (3, 4)}
    assert len(quiet) == 1


def test_episode_seeds_spread_like_an_n200_eval(bundle_for, task):
    """Seeds 1-20 of one job: the post scatters around post_expected with the binomial standard
    error of an n=200 eval (20 draws: the sample sd lies within 0.6-1.4x of it with p = 0.99)."""
    import statistics

    b = bundle_for()
    posts = []
    for seed in range(1, 21):
        b.manifest.episode = f"seed:{seed}"
        r = simulate(b, task, 0, gpu("A40"))
        posts.append(r.post)
    expected, se = r.details["post_expected"], (r.pre * (1 - r.pre) / r.eval_n) ** 0.5
    mean, sd = statistics.fmean(posts), statistics.stdev(posts)
    print(f"\nseeds 1-20: post mean {mean:.4f} sd {sd:.4f}; post_expected {expected:.4f}, n=200 standard error {se:.4f}")
    assert 0.6 * se < sd < 1.4 * se and abs(mean - expected) < 3 * se / 20**0.5


def test_a_reused_result_draws_its_own_noise(bundle_for, task):
    backend = MockBackend(reuse=True)
    posts, expected = set(), set()
    for k in range(12):
        b = bundle_for()
        b.manifest.episode = f"seed:{k}"
        result = asyncio.run(backend.result(asyncio.run(backend.submit(b, task))))
        posts.add(result.post)
        expected.add(result.details["post_expected"])
    assert len(expected) == 1 and len(posts) > 3
