"""Shared vocabulary and small helpers with no dependency on the rest of the package."""
