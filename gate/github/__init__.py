"""GitHub: the REST client, the run history on a branch, workflow commands, and the action's entry point."""
