"""Reading the user's files: YAML and JSON documents that remember their lines, and folders."""
