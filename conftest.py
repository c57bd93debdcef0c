"""Repository-level pytest configuration (the plugin itself loads through its entry point)."""
