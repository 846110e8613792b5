# syntax=docker/dockerfile:1
# guardhook: the admission webhook image, one file for users and CI (image/build.sh builds it with
# podman, image/test.sh runs it). From the repository root:
#   docker build -t ghcr.io/guardhook/guardhook:0.1.0 .                  # on python:3.11-slim
#   BASE=localhost/guardhook-base:bookworm image/build.sh               # on a Debian base (image/base.sh)
# BASE is any image with Python 3.11 as `python3` and the venv module (python:3.11-slim, or Debian's
# python3 + python3-venv); the build and runtime stages both use it, so the venv's interpreter link is
# valid in the image, which is the runtime stage's root copied into an empty image (one layer).
# Dependencies come only from image/requirements.lock (exact versions, sha256 hashes, wheels only); the
# image has no pip and no compiler. It runs as uid 10001 on a read-only root filesystem: nothing is
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
# libraries, the packages' own test suites (jsonschema, websocket-client, referencing, ...) and numpy's
# build tools (numpy.distutils, f2py); guardhook keeps its source, for tracebacks.
# Each distribution's RECORD then lists only the files still there (kubernetes-validate's listed every
# schema of the 13 versions: 2.6 MB); no pip reads them in the image, importlib.metadata reads the rest.
ARG RECORDS="import pathlib, sys; site = pathlib.Path(sys.argv[1]); [r.write_text(''.join(l for l in r.read_text().splitlines(True) if (site / l.rsplit(',', 2)[0]).exists())) for r in site.glob('*.dist-info/RECORD')]"
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
 && find "$site" -depth -type d -name tests ! -path "$site/guardhook/*" -exec rm -rf {} + \
 && rm -rf "$site/numpy/distutils" "$site/numpy/f2py" /opt/guardhook/bin/f2py /opt/guardhook/bin/__pycache__ \
 && /opt/guardhook/bin/python -c "$RECORDS" "$site" \
 && /opt/guardhook/bin/python -m compileall -q "$site/guardhook" \
 && /opt/guardhook/bin/guardhook --version

# The run-time root, made in a stage of its own and copied whole into an empty image (one layer): files
# deleted in a layer on top of the base would still be shipped in the base's layer. Taken out of the base,
# as nothing runs them: pip and ensurepip's wheels; the standard library's parts for development and the
# desktop (lib2to3, distutils, the test package, idlelib, turtledemo, tkinter, pydoc's topics); its
# sources (~12 MB: it runs from bytecode compiled here, as the dependencies do); documentation but the
# copyright files (the licences). The Debian package database stays, for scanners, and so does perl-base.
FROM ${BASE} AS runtime
RUN rm -rf /usr/local/bin/pip* /usr/local/lib/python3*/site-packages/pip \
      /usr/local/lib/python3*/site-packages/pip-* /usr/local/lib/python3*/ensurepip/_bundled \
      /usr/lib/python3*/ensurepip/_bundled /usr/share/python-wheels \
 && stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])') \
 && for m in lib2to3 distutils test idlelib turtledemo tkinter pydoc_data ensurepip; do rm -rf "${stdlib:?}/$m"; done \
 && python3 -m compileall -q -b "$stdlib" \
 && find "$stdlib" -name '*.py' ! -path '*/site-packages/*' ! -path '*/dist-packages/*' -delete \
 && find "$stdlib" -depth -type d -name __pycache__ -exec rm -rf {} + \
 && { [ ! -d /usr/share/doc ] || find /usr/share/doc -type f ! -name copyright -delete; } \
 && echo 'guardhook:x:10001:' >> /etc/group \
 && echo 'guardhook:x:10001:10001:guardhook:/nonexistent:/usr/sbin/nologin' >> /etc/passwd \
 && python3 -c 'import ssl, json, email, http.client, concurrent.futures, asyncio'
COPY --from=build /opt/guardhook /opt/guardhook

FROM scratch
ARG VERSION=0.1.0
ARG SOURCE=https://github.com/guardhook/guardhook
LABEL org.opencontainers.image.title="guardhook" \
      org.opencontainers.image.description="Admission webhook: the LeaderWorkerSet group is the unit of deletion, eviction, traffic, disruption budgets and scaling" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=runtime / /
# Bytecode is compiled at build time; at run time Python must not try to write it. The base's own
# environment is not inherited by an image made from scratch: PATH and the locale are set here.
ENV PATH=/opt/guardhook/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 10001:10001
EXPOSE 8443 8080 8081
ENTRYPOINT ["guardhook"]
CMD ["serve", "--cert-dir", "/certs"]
