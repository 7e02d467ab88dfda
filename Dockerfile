# biaslab pipeline image: `dvc repro` (the same as `make run`). One Dockerfile for a CUDA host and for CPU:
#
#   docker build -t biaslab .                                   # CUDA: PyPI's torch wheel bundles the CUDA runtime;
#                                                               # + the [gpu] extra (bitsandbytes), see GPU_EXTRA
#   docker build -t biaslab:cpu --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu .   # CPU only, small
#
#   docker run --rm --gpus all -e HF_TOKEN -v hf-cache:/hf-cache \
#       -v /path/to/shared/datasets:/data/datasets:ro -v "$PWD/mlruns:/app/mlruns" biaslab
#
# A CUDA host needs only the NVIDIA driver and the NVIDIA Container Toolkit (`--gpus`); no CUDA base image.
# Hugging Face: the hub cache is HF_HOME=/hf-cache (mount a volume so models download once); HF_TOKEN is read
# from the environment at run time (`-e HF_TOKEN`), never baked into the image; the hub is reachable unless
# you ask for offline mode at run time (`-e HF_HUB_OFFLINE=1`) or at build time (`--build-arg HF_HUB_OFFLINE=1`).
# The data mirror is optional: mounted at /data/datasets it is read in place, otherwise every raw file is
# downloaded from its pinned source (docs/data.md). docker-compose.yml runs the same image with a GPU worker.
# The container runs as the unprivileged user `biaslab` (uid 1000) under tini as PID 1: tini forwards
# `docker stop`'s SIGTERM to the stage, which ends its MLflow run KILLED (docs/operations.md), and reaps
# orphaned children (DataLoader workers, git). Mounted folders the stages write must be writable by uid 1000.
FROM python:3.11-slim

ARG HF_HUB_OFFLINE=0
ENV PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    HF_HOME=/hf-cache \
    HF_HUB_OFFLINE=${HF_HUB_OFFLINE} \
    BIASLAB_DATA_DIR=/data/datasets

RUN apt-get update && apt-get install -y --no-install-recommends git make tini && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 1000 --user-group biaslab \
 && mkdir -p /hf-cache /artifacts /dvc-cache /app && chown biaslab:biaslab /hf-cache /artifacts /dvc-cache /app

WORKDIR /app
COPY pyproject.toml requirements.lock README.md ./
# torch: the default (PyPI) wheel is the CUDA build and also runs on a CPU; pass the PyPI-compatible CPU wheel
# index as TORCH_INDEX_URL for a CPU-only image without the multi-GB CUDA libraries
ARG TORCH_INDEX_URL=""
RUN pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch==2.13.0 \
 && grep -v '^torch==' requirements.lock > requirements.notorch.txt \
 && pip install -r requirements.notorch.txt && rm requirements.notorch.txt
COPY --chown=biaslab:biaslab . .
# the [gpu] extra (bitsandbytes: lora.quantization 4bit/8bit, the paged 8-bit optimizer lora.optimizer: auto picks on
# a GPU) goes into the default, CUDA image: GPU_EXTRA=auto installs it unless TORCH_INDEX_URL names another index
# (the CPU image); 1 = always, 0 = never. PIP_EXTRAS: other extras of pyproject.toml on top of the locked set
ARG GPU_EXTRA=auto
ARG PIP_EXTRAS=""
RUN pip install --no-deps -e . \
 && extras="$PIP_EXTRAS" \
 && if [ "$GPU_EXTRA" = 1 ] || { [ "$GPU_EXTRA" = auto ] && [ -z "$TORCH_INDEX_URL" ]; }; then \
      extras="${extras:+$extras,}gpu"; fi \
 && if [ -n "$extras" ]; then pip install -e ".[$extras]"; fi \
 && chown -R biaslab:biaslab /app
USER biaslab
RUN git rev-parse --git-dir >/dev/null 2>&1 \
 || (git init -q && git add -A && git -c user.email=docker@biaslab -c user.name=docker commit -qm image)
VOLUME ["/hf-cache"]

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["dvc", "repro"]
