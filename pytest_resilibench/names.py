"""The benchmark's vocabularies that many modules share, with no dependency of their own.

Importing this costs nothing, so the plugin's option parsing can name the task types and
difficulties without loading the task loader.
"""

from __future__ import annotations

__all__ = ["DIFFICULTIES", "TASK_TYPES"]

TASK_TYPES = ("simple_task", "basic_task", "data_pipeline", "api_integration",
              "multi_stage_pipeline")
DIFFICULTIES = ("easy", "medium", "hard")
