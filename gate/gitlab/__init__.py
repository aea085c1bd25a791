"""GitLab: the REST API v4 client and the merge request note (``rag-gate gitlab note``)."""

MISSING = ("error", "note")  # --missing-report: a report that is not there exits 2, or is said in the note
AUTH_SCHEMES = ("private-token", "bearer")  # how the token is sent: the PRIVATE-TOKEN header, or Authorization: Bearer
TOKEN_HINT = ("use a project access token (role Reporter or above, scope api) or a personal access token in a masked CI/CD "
              "variable: the job token (CI_JOB_TOKEN) cannot write notes")
