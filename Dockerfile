FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RAGAS_DO_NOT_TRACK=true \
    DEEPEVAL_TELEMETRY_OPT_OUT=1

# Dependencies first (pinned), so that a code change rebuilds only the last layers. What to install is the list in
# pyproject.toml (the dependencies and the judges extra); constraints.txt holds the versions of the whole closure.
# Removed in the same layer, so the image does not carry them, what no run imports: the test suites that numpy,
# scipy, pandas and pyarrow ship (about 100 MB); pyarrow's Flight and S3 libraries and its C++ headers and
# Cython sources (datasets, which ragas imports, needs pyarrow's core only). pip compiles nothing (--no-compile: 161 MB
# of .pyc for every module of every package); instead the modules a judge run imports are compiled once, by
# importing them (57 MB): a judge run starts as fast as with every .pyc, and what it imports later is compiled in
# memory.
COPY pyproject.toml constraints.txt /action/
RUN python -c "import tomllib; p = tomllib.load(open('/action/pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['judges']))" > /action/requirements.txt \
    && pip install --no-compile --constraint /action/constraints.txt --requirement /action/requirements.txt \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && find "$site/numpy" "$site/scipy" "$site/pandas" "$site/pyarrow" -depth -type d -name tests -exec rm -rf {} + \
    && rm -rf "$site"/pyarrow/*flight* "$site"/pyarrow/*s3* "$site"/pyarrow/include \
    && find "$site/pyarrow" "$site/numpy" "$site/scipy" "$site/pandas" -type f \( -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' -o -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' \) -delete \
    && env -u PYTHONDONTWRITEBYTECODE python -c "import ragas.llms, ragas.metrics.collections, ragas.prompt.metrics.base_prompt, deepeval.metrics, deepeval.test_case, deepeval.models, openai, instructor, tenacity, scipy.stats, yaml, jsonschema, jsonschema_rs, msgspec, requests, tqdm"

COPY README.md LICENSE entrypoint.py /action/
COPY gate/ /action/gate/
RUN pip install --no-deps /action

ENTRYPOINT ["python", "/action/entrypoint.py"]
