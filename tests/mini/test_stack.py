"""Seeds decoded together (`mini.stack`) compute what each model computes alone.

The shipped micro base, perturbed per seed, plays calc_chain tasks with its tools (so rollouts run
calls, forced tool responses and the batch's compaction); every seed's rollouts, greedy and
sampled with its own generator, must equal that seed's model played alone through transformers'
own Qwen3 forward.
"""

import pytest

from tests.marks import import_extra

pytestmark = pytest.mark.extras
torch = import_extra("torch", "the mini backend", "mini")

from trainergym.mini.base import MINI_DIR  # noqa: E402
from trainergym.mini.rollout import Task, generate  # noqa: E402
from trainergym.mini.stack import SeedStack, accuracies, generate_stacked, supports  # noqa: E402
from trainergym.mini.tokenizer import load_tokenizer  # noqa: E402
from trainergym.task.spec import get_family  # noqa: E402

CAPS = dict(max_turns=6, max_tokens=32, max_len=400, max_new=200)


def _seeds(n: int, noise: float = 0.02):
    from transformers import AutoModelForCausalLM

    path = next((MINI_DIR / "data").glob("calc_chain-micro-*"))
    models = []
    for i in range(n):
        m = AutoModelForCausalLM.from_pretrained(str(path))
        g = torch.Generator().manual_seed(i)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(noise * torch.randn(p.shape, generator=g) * (i > 0))
        models.append(m)
    return models, load_tokenizer(path)


@pytest.fixture(scope="module")
def seeds():
    return _seeds(3)


@pytest.fixture(scope="module")
def tasks():
    family = get_family("calc_chain")
    return family, [Task.from_row(r) for r in family.generate("stack-test", 12, namespace="public", difficulty=1)]


def test_logits_equal_transformers_per_model_with_padding_and_cache(seeds):
    models, _ = seeds
    assert all(supports(m) for m in models)
    torch.manual_seed(0)
    vocab = models[0].config.vocab_size
    ids = torch.randint(5, vocab, (6, 9))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding, as generate pads prompts
    mask[3, :2] = 0
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    more = torch.randint(5, vocab, (6, 3))
    stack = SeedStack(models, 2)
    cache = stack.new_cache()
    first = stack(ids, mask, pos, cache).logits
    mask2 = torch.cat([mask, torch.ones_like(more)], 1)
    second = stack(more, mask2, pos[:, -1:] + 1 + torch.arange(3)[None], cache).logits
    for i, m in enumerate(models):
        rows = slice(2 * i, 2 * i + 2)
        with torch.no_grad():
            ref = m(input_ids=torch.cat([ids, more], 1)[rows], attention_mask=mask2[rows],
                    position_ids=torch.cat([pos, pos[:, -1:] + 1 + torch.arange(3)[None]], 1)[rows]).logits
        real = mask[rows].bool()
        assert torch.allclose(first[rows][real], ref[:, :9][real], atol=1e-4)
        assert torch.allclose(second[rows], ref[:, 9:], atol=1e-4)


@pytest.mark.parametrize("greedy", [True, False])
def test_each_seed_plays_as_it_would_alone(seeds, tasks, greedy):
    models, tok = seeds
    family, ts = tasks
    gens = [torch.Generator().manual_seed(10 + i) for i in range(len(models))]
    together = generate_stacked(models, tok, family, [ts] * len(models), generators=None if greedy else gens,
                                greedy=greedy, **CAPS)
    calls = 0
    for i, m in enumerate(models):
        alone = generate(m, tok, family, ts, greedy=greedy, generator=torch.Generator().manual_seed(10 + i), **CAPS)
        for a, b in zip(alone, together[i], strict=True):
            assert (a.completion_ids, a.env_mask, a.messages, a.stop) == (b.completion_ids, b.env_mask, b.messages, b.stop)
            calls += a.tool_calls
    assert calls > 0  # the tools ran: forced responses and compaction were exercised


def test_accuracies_equal_each_models_accuracy(seeds):
    from trainergym.mini.rollout import accuracy

    models, tok = seeds
    family = get_family("calc_chain")
    rows = family.generate("stack-acc", 20, namespace="public", difficulty=1)
    assert accuracies(models, tok, family, rows, batch=8, **CAPS) == [
        accuracy(m, tok, family, rows, batch=8, **CAPS) for m in models]


def test_unequal_task_lists_are_refused(seeds, tasks):
    models, tok = seeds
    family, ts = tasks
    with pytest.raises(ValueError, match="one task list per model"):
        generate_stacked(models, tok, family, [ts, ts[:3], ts], greedy=True, **CAPS)


def _job(steps: int = 3):
    from trainergym.mini.knobs import map_knobs, reference_table
    from trainergym.mini.scale import get_scale

    family = get_family("calc_chain")
    ref = reference_table(family)
    return map_knobs(dict(ref, max_steps=steps, batch_size=8, group_size=4, warmup_steps=0), ref, get_scale("micro"),
                     max_tokens_cap=32)


def test_a_seed_beside_others_trains_as_it_does_alone(tasks):
    """The lockstep shares only the decoding: seed 1 trained beside seeds 0 and 2 has the reward
    curve and the weights it has trained alone."""
    import functools

    from trainergym.mini.grpo import train_seeds
    from trainergym.mini.train import check_reward

    family, ts = tasks
    reward = functools.partial(check_reward, family.__name__)
    together_models, tok = _seeds(3, noise=0.0)
    together = train_seeds(together_models, tok, family, ts, reward, _job(), [0, 1, 2], max_len=400, max_new=200)
    alone_models, _ = _seeds(1, noise=0.0)
    alone = train_seeds(alone_models, tok, family, ts, reward, _job(), [1], max_len=400, max_new=200)[0]
    assert len(together[1].rewards) == 3 and together[1].rollouts == 24
    assert together[1].rewards == alone.rewards
    assert together[0].rewards != together[1].rewards or together[1].rewards != together[2].rewards  # seeds differ
    for a, b in zip(alone.model.parameters(), together[1].model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_failing_seed_stops_every_seed_with_its_error(tasks):
    from trainergym.mini.grpo import train_seeds

    family, ts = tasks
    calls = []

    def reward(batch, completions):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the job's reward failed")
        return [0.0] * len(batch)

    models, tok = _seeds(2, noise=0.0)
    with pytest.raises(RuntimeError, match="the job's reward failed"):
        train_seeds(models, tok, family, ts, reward, _job(), [0, 1], max_len=400, max_new=200)
