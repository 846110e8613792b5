#!/usr/bin/env bash
# image/test.sh: build the image (image/build.sh) and run it (tests/test_image.py): guardhook serve in the
# container on 127.0.0.1 with the sample fleet answers /healthz, /readyz and a captured review on
# /validate over TLS as the offline engine does; `guardhook --version`, uid 10001, read-only root, labels,
# no pip or compiler. With BASE unset it builds on the Debian base of image/base.sh (no registry needed).
# PYTHON: the interpreter with guardhook[test] installed (default .venv/bin/python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
start=$(date +%s)
BASE=${BASE:-$(image/base.sh)}
export BASE
GUARDHOOK_IMAGE=$(image/build.sh)
export GUARDHOOK_IMAGE GUARDHOOK_REQUIRE_IMAGE=1
built=$(date +%s)
"$PYTHON" -m pytest -q -p no:cacheprovider tests/test_image.py tests/test_image_files.py
echo "image/test.sh: base + build + archive + SBOM $(( built - start ))s, tests $(( $(date +%s) - built ))s" >&2
