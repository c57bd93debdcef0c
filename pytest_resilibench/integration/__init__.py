"""The pytest integration: options, cases, the runner, the session, gates."""
