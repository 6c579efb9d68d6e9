# syntax=docker/dockerfile:1.7
# trainergym's OpenEnv server (`trainergym serve`; docs/adapters.md, "OpenEnv"), mock backend by default.
#
#   docker build -t trainergym-openenv .          # from the repository root (or: openenv build .)
#   docker run --rm -p 8000:8000 \
#       --cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#       -e TRAINERGYM_HIDDEN_SEED=<32+ hex characters> -v trainergym-data:/data trainergym-openenv
#
# The flags are for the probe's sandbox: submit_job runs agent-written code under bubblewrap (or
# util-linux `unshare`), which needs namespaces and mounts that Docker's default capabilities,
# seccomp and AppArmor profiles forbid (`--privileged` also works). Without them the sandbox
# cannot start and submit_job cannot validate a job; `docker run ... trainergym-openenv trainergym
# doctor` says what the container supports. Settings: TRAINERGYM_SERVE_{BACKEND,TASK,MAX_SESSIONS,
# JOB_TIMEOUT,REWARD_NOISE,RUNS_DIR,BACKEND_OPTIONS}, HOST, PORT.
FROM python:3.11-slim-bookworm

# uv 0.13.9 wrote uv.lock (its `exclude-dependencies` needs a recent uv).
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /uvx /bin/
# bubblewrap for the probe's sandbox; util-linux (unshare, setpriv) for its other mode and uid switch.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap util-linux ca-certificates \
    && rm -rf /var/lib/apt/lists/*

ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never
WORKDIR /app
# Dependencies first, so a source change reuses this layer: the lock, the project's metadata and
# the task families (workspace members, installed with the library).
COPY pyproject.toml uv.lock README.md ./
COPY envs ./envs
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev --extra openenv --no-editable --no-install-project
COPY src ./src
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev --extra openenv --no-editable

# The hidden-eval seed and the install secret are created in the data directory on first use:
# mount /data to keep them (and compare results across restarts), or set TRAINERGYM_HIDDEN_SEED.
ENV PATH=/app/.venv/bin:$PATH \
    HOST=0.0.0.0 \
    PORT=8000 \
    TRAINERGYM_DATA_DIR=/data \
    TRAINERGYM_SERVE_BACKEND=mock
RUN mkdir -p /data && chmod 0700 /data
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('PORT', '8000'), timeout=4)"]
# What `trainergym serve` runs, configured from the environment above.
CMD ["python", "-m", "trainergym.adapters.openenv"]
