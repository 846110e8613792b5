"""The `guardhook` command line: one module per command and their shared scan helpers."""
