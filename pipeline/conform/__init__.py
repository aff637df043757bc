"""Conformance: generated inference adapters judged by the pinned frameworks themselves, in their own peer
environments (`integrate conform`). A probe runs inside the framework and records; the driver here compares what it
recorded with dayone's reference reading of the checkpoint and writes the levels per world size."""
