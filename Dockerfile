FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RAGAS_DO_NOT_TRACK=true \
    DEEPEVAL_TELEMETRY_OPT_OUT=1

# Dependencies first (pinned), so that a code change rebuilds only the last layers. What to install is the list in
# pyproject.toml (the dependencies and the judges extra); constraints.txt holds the versions of the whole closure.
# The test suites that numpy, scipy, pandas and pyarrow ship (about 100 MB) are never imported: removed in the same
# layer, so the image does not carry them.
COPY pyproject.toml constraints.txt /action/
RUN python -c "import tomllib; p = tomllib.load(open('/action/pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['judges']))" > /action/requirements.txt \
    && pip install --constraint /action/constraints.txt --requirement /action/requirements.txt \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && find "$site/numpy" "$site/scipy" "$site/pandas" "$site/pyarrow" -depth -type d -name tests -exec rm -rf {} +

COPY README.md LICENSE entrypoint.py /action/
COPY gate/ /action/gate/
RUN pip install --no-deps /action

ENTRYPOINT ["python", "/action/entrypoint.py"]
