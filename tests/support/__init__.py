"""What the tests share that is no test: the stand-in servers on 127.0.0.1 (a RAG service, an OpenAI-compatible
judge, GitHub's and GitLab's APIs), a DevTools client for the browser tests, and builders of typed settings."""
