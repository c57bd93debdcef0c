"""The benchmark's model: tools, simulator, tasks, flaws, prompts, scoring, records."""
