"""Data sources: the dataset adapters (released rows, MQuAKE-MemStream, synthetic streams),
the population rule that picks a run's questions, and the builders of derived datasets.
They produce the method's inputs (`cmc.records.Dataset`) and keep labels apart."""
