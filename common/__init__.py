"""What every floor shares: one error type, strict JSON and crash-safe writes, where run-time
files lie, credential scrubbing, reader prompts, the reader-call contract (Request,
Prediction, Reader) and the registry of configurable classes. It imports no other package."""
