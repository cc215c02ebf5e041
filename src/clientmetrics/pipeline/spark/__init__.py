"""The Spark shell: the session, grouping by instance into the core, the tasks' files, state."""
