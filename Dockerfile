# The GPU job image for minify-action: a CUDA build of torch, triton, a C++ compiler and the bot.
#
# Used as a `container:` job (`options: --gpus all`) on self-hosted GPU runners; the composite
# action finds the bot already installed and runs it. Build it on the GPU runner's CI (see
# docs/action.md), push it, and reference it by digest (image@sha256:...) in workflows.
#
#   docker build -t ghcr.io/OWNER/minify-action-gpu:0.1.0 .
#
# Versions are pinned here; bump them together. torch 2.13.0 on PyPI is the CUDA 13.0 build and
# requires triton 3.7.1 (wheel metadata); for a CUDA 12.x driver, build with
#   --build-arg CUDA_IMAGE=nvidia/cuda:12.8.1-devel-ubuntu22.04
#   --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
# To pin the base by digest, replace the tag with nvidia/cuda:<tag>@sha256:<digest>
# (`docker buildx imagetools inspect nvidia/cuda:<tag>` prints it).

ARG CUDA_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu22.04
FROM ${CUDA_IMAGE}

ARG TORCH_VERSION=2.13.0
ARG TRITON_VERSION=3.7.1
ARG TORCH_INDEX_URL=https://pypi.org/simple

LABEL org.opencontainers.image.title="minify-action GPU job image" \
      org.opencontainers.image.description="torch ${TORCH_VERSION} (CUDA), triton ${TRITON_VERSION}, g++ and minify-bot" \
      org.opencontainers.image.licenses="BSD-3-Clause"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/minify-venv \
    PATH=/opt/minify-venv/bin:$PATH

# Ubuntu rotates exact package versions out of its archive, so pinning them would break rebuilds;
# reproducibility comes from the pinned base image (by digest in production) and the pinned wheels.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        python3 python3-venv python3-dev g++ git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv "$VIRTUAL_ENV"

RUN pip install --no-cache-dir --index-url "$TORCH_INDEX_URL" "torch==${TORCH_VERSION}" \
    && pip install --no-cache-dir "triton==${TRITON_VERSION}" "jsonschema==4.26.0" \
    && python -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"

COPY pyproject.toml README.md /opt/minify-action/
COPY bot /opt/minify-action/bot
COPY templates /opt/minify-action/templates
RUN pip install --no-cache-dir /opt/minify-action \
    && minify-bot --version

# The unprivileged user the action starts the model-code stages as (bot/action/harden.py): it can
# write the run directory it is handed, not the installed bot, the runner's _actions or file commands.
RUN useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin minify-model

# No USER: GitHub runs job containers as root (the runner's file-command directories need it); the
# action hands what it writes back to the workspace owner, so no root-owned files are left behind.
# No ENTRYPOINT/WORKDIR: a job container's steps run with the workspace as working directory.
