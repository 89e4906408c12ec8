"""The scheduling framework: configuration, session, extension points, statement, registry, run."""
