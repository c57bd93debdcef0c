"""The suite needs nothing beyond the plugin (loaded through its entry point)."""
