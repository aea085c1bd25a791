FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RAGAS_DO_NOT_TRACK=true \
    DEEPEVAL_TELEMETRY_OPT_OUT=1

# Dependencies first (pinned), so that a code change rebuilds only the last layers.
COPY constraints.txt /action/constraints.txt
# The test suites that numpy, scipy, pandas and pyarrow ship (about 100 MB) are never imported: removed in the
# same layer, so the image does not carry them.
RUN pip install --constraint /action/constraints.txt \
        "ragas==0.4.3" "deepeval==4.3.1" "langchain-community==0.4.1" "openai==1.109.1" "instructor==1.3.2" \
        "httpx==0.28.1" "pyyaml" "jsonschema" "jsonschema-rs" "msgspec" "requests" "tqdm" \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && find "$site/numpy" "$site/scipy" "$site/pandas" "$site/pyarrow" -depth -type d -name tests -exec rm -rf {} +

COPY pyproject.toml README.md config.schema.json report.schema.json entrypoint.py /action/
COPY gate/ /action/gate/
RUN pip install --no-deps /action

ENTRYPOINT ["python", "/action/entrypoint.py"]
