"""The biaslab command (main), one module per group of commands."""
