"""Local inference engines the plugin can start for a session (real servers, real models)."""
