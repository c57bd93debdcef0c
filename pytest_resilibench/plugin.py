"""pytest hooks of pytest-resilibench (hooks only; the logic lives in the modules beside it).

Loaded through the `pytest11` entry point. Kept cheap to import: no model SDK, no torch.
"""

from __future__ import annotations
