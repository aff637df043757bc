"""`integrate run`: every stage against one checkpoint, keyed by input hashes and resumable."""
