"""Frozen readers: one interface, `prepare(...) -> Request` then `generate(request) -> Prediction`."""
