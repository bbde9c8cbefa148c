#!/usr/bin/env bash
# The coordinator's checks on a CUDA GPU, for a machine that has torch and transformers but
# not the rest of trinity's dependencies: the missing pure-Python ones (and pydantic-core) are
# installed from wheels in .whl/ (see the download line below), trinity runs from src/.
# Prepare here:  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#   --implementation cp --platform manylinux2014_x86_64 -d .whl cma diskcache pydantic \
#   pydantic_core annotated-types typing-inspection platformdirs typing_extensions
# (the versions the venv holds). Then run this script there; the log goes to ${OUT:-.}/cuda-check.log.
set -uo pipefail
log="${OUT:-.}/cuda-check.log"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:src TRINITY_HOME=/tmp/trinity-home PYTHONUNBUFFERED=1
{
  nvidia-smi -L
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"
  python3 -m pytest -q -p no:cacheprovider -rs tests/test_coordinator.py -m "not integration"
} 2>&1 | tee "$log"
