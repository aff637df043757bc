"""One module per `integrate` command."""
