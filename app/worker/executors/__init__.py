"""What a run executes: a registered python task, an http request, or a shell command."""
