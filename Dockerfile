# biaslab pipeline image (CPU). Build and run with the data mirror mounted read-only beside the project:
#
#   docker build -t biaslab .
#   docker run --rm -v /path/to/shared/datasets:/data/datasets:ro -e BIASLAB_DATA_DIR=/data/datasets \
#       -v "$PWD/mlruns:/app/mlruns" biaslab
#
# The image installs the locked dependencies and runs `dvc repro` (the same as `make run`).
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    BIASLAB_DATA_DIR=/data/datasets

RUN apt-get update && apt-get install -y --no-install-recommends git make && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml requirements.lock README.md ./
# torch: pass the PyTorch CPU wheel index as TORCH_INDEX_URL to avoid the multi-GB CUDA build
ARG TORCH_INDEX_URL=""
RUN pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch==2.13.0 \
 && grep -v '^torch==' requirements.lock > requirements.notorch.txt \
 && pip install -r requirements.notorch.txt && rm requirements.notorch.txt
COPY . .
RUN pip install --no-deps -e . \
 && (git rev-parse --git-dir >/dev/null 2>&1 || (git init -q && git add -A && git -c user.email=docker@biaslab -c user.name=docker commit -qm image)) \
 && sed -i 's#^  - mirror: .*#  - mirror: /data/datasets#' dvc.yaml

CMD ["dvc", "repro"]
