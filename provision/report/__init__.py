"""Reports: build the versioned document, diagnose, render (console, Markdown, HTML), keep history."""
