FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY constraints.txt pyproject.toml README.md config.schema.json entrypoint.py /action/
COPY gate/ /action/gate/
RUN pip install --constraint /action/constraints.txt /action

ENTRYPOINT ["python", "/action/entrypoint.py"]
