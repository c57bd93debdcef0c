"""Summaries, statistics, the JSON and HTML reports and the outcome words."""
