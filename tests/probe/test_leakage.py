"""Nothing an agent can see contains a hidden-eval item: every tool output and info of an
episode, every workspace file, and the job bundle are searched for every hidden item's text."""

import asyncio
import json

import pytest

from trainergym import AsyncTrainerEnv
from trainergym.task import hidden
from trainergym.agents import make_agent
from trainergym.task.spec import families, load_task


@pytest.mark.parametrize("family", sorted(families()))
def test_no_hidden_item_reaches_the_agent(family, tmp_path):
    async def episode():
        env = AsyncTrainerEnv(runs_dir=tmp_path / "runs", workdir=tmp_path / "work")
        (tmp_path / "work").mkdir()
        seen = []
        obs, info = await env.reset(options={"family": family})
        seen += [obs, json.dumps(info, default=str)]
        agent = make_agent("reference")
        agent.reset(obs, info)
        while True:
            # also ask for everything the tools will show
            for extra in ({"name": "get_baseline_scores", "arguments": {}}, {"name": "list_files", "arguments": {}}):
                o, *_ = await env.step(extra) if env.episode.turns_left > 10 else ("", )
                seen.append(o)
            obs, reward, terminated, truncated, info = await env.step(agent.act(obs, info))
            seen += [obs, json.dumps(info, default=str)]
            if terminated or truncated:
                break
        assert info["reward_breakdown"]["validated"], obs
        files = [p for root in (env.episode.dir, tmp_path / "runs") for p in root.rglob("*") if p.is_file()]
        assert any(p.name == "rl.toml" for p in files) and any(p.name == "INSTRUCTIONS.md" for p in files)
        seen += [p.read_text(errors="replace") for p in files]
        env.close()
        return "\n".join(seen)

    text = asyncio.run(episode())
    assert load_task(family).dev_examples[0].prompt in text  # the search does see what the agent saw
    items = hidden.hidden_eval(family)
    leaked = [ex.id for ex in items if ex.prompt in text]
    assert not leaked, f"{len(leaked)} hidden items visible to the agent"
    assert hidden.secret_seed() not in text
