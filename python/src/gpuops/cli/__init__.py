"""The click front end: parse input, call the core, map errors to exit codes."""
