"""dayone.core: what every layer uses (input errors, atomic writes, untrusted JSON, secret redaction, numerics
comparison). It imports nothing from dayone above it: spec/, kernels/, adapters/ and the pipeline build on it."""
