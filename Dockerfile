# syntax=docker/dockerfile:1
# guardhook: the admission webhook image, one file for users and CI (image/build.sh builds it with
# podman, image/test.sh runs it). From the repository root:
#   docker build -t ghcr.io/guardhook/guardhook:0.1.0 .                  # on python:3.11-slim
#   BASE=localhost/guardhook-base:bookworm image/build.sh               # on a Debian base (image/base.sh)
# BASE is any image with Python 3.11 as `python3` and the venv module (python:3.11-slim, or Debian's
# python3 + python3-venv); both stages use it, so the venv's interpreter link is valid in the final one.
# Dependencies come only from image/requirements.lock (exact versions, sha256 hashes, wheels only); the
# final stage has no pip and no compiler. It runs as uid 10001 on a read-only root filesystem: nothing is
# written at run time except gunicorn's worker heartbeat in /tmp (an emptyDir in manifests/base/).
# TLS inside the build (an intercepting proxy): pass the CA bundle as the build secret `ca-bundle`
# (`--secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt`); a secret never lands in a layer.
ARG BASE=docker.io/library/python:3.11-slim

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY image/requirements.lock ./
# PIP_CERT (not --cert) so every TLS connection pip makes uses the bundle.
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && python3 -m venv /opt/guardhook \
 && /opt/guardhook/bin/pip install --require-hashes --no-deps --only-binary=:all: -r requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY guardhook ./guardhook
# The project itself with the locked build backend (no isolated build fetching setuptools unpinned);
# `pip check` fails the build when pyproject.toml needs something the lock lacks. Then what never runs
# leaves the environment: pip and the build backend; the kubernetes client's asyncio twin
# (kubernetes.aio, ~70 MB; nothing imports it: guardhook and the rest of the client are synchronous);
# kubernetes-validate's schemas but the one Kubernetes version `check` reads (~100 MB for 13 versions;
# guardhook.commands.schema.schema_dir_name); numpy's own test suites and C headers (~27 MB). The
# dependencies run from their bytecode alone (compiled beside where the source was, as Python imports a
# module with no source; ~60 MB of sources saved), without type stubs, Cython and C sources or static
# libraries; guardhook keeps its source, for tracebacks.
RUN /opt/guardhook/bin/pip install --no-deps --no-build-isolation --no-index . \
 && /opt/guardhook/bin/pip check \
 && /opt/guardhook/bin/pip uninstall --quiet --yes setuptools pip \
 && site=$(echo /opt/guardhook/lib/python3*/site-packages) \
 && rm -rf "$site/kubernetes/aio" \
 && keep=$(/opt/guardhook/bin/python -c 'from guardhook.commands.schema import schema_dir_name; print(schema_dir_name())') \
 && find "$site/kubernetes_validate/kubernetes-json-schema" -mindepth 1 -maxdepth 1 ! -name "$keep" -exec rm -rf {} + \
 && test -s "$site/kubernetes_validate/kubernetes-json-schema/$keep/_definitions.json" \
 && find "$site/numpy" -depth -type d \( -name tests -o -name include \) -exec rm -rf {} + \
 && /opt/guardhook/bin/python -m compileall -q -b "$site" \
 && find "$site" \( -name '*.py' -o -name '*.pyi' -o -name '*.pyx' -o -name '*.pxd' -o -name '*.c' -o -name '*.h' \
      -o -name '*.a' \) ! -path "$site/guardhook/*" -delete \
 && find "$site/guardhook" -name '*.pyc' ! -path '*/__pycache__/*' -delete \
 && find "$site" -depth -type d -name __pycache__ ! -path "$site/guardhook/*" -exec rm -rf {} + \
 && /opt/guardhook/bin/python -m compileall -q "$site/guardhook" \
 && /opt/guardhook/bin/guardhook --version

FROM ${BASE}
ARG VERSION=0.1.0
ARG SOURCE=https://github.com/guardhook/guardhook
LABEL org.opencontainers.image.title="guardhook" \
      org.opencontainers.image.description="Admission webhook: the LeaderWorkerSet group is the unit of deletion, eviction, traffic, disruption budgets and scaling" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# Bytecode is compiled at build time; at run time Python must not try to write it.
ENV PATH=/opt/guardhook/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
# No pip in the final stage (the base's own, ensurepip's wheels); the user without useradd, which a
# minimal Debian base lacks.
RUN rm -rf /usr/local/bin/pip* /usr/local/lib/python3*/site-packages/pip \
      /usr/local/lib/python3*/site-packages/pip-* /usr/local/lib/python3*/ensurepip/_bundled \
      /usr/lib/python3*/ensurepip/_bundled /usr/share/python-wheels \
 && echo 'guardhook:x:10001:' >> /etc/group \
 && echo 'guardhook:x:10001:10001:guardhook:/nonexistent:/usr/sbin/nologin' >> /etc/passwd
COPY --from=build /opt/guardhook /opt/guardhook
USER 10001:10001
EXPOSE 8443 8080 8081
ENTRYPOINT ["guardhook"]
CMD ["serve", "--cert-dir", "/certs"]
